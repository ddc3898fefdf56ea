//! `int spinscope_rust_demangle(const char *symbol, char *out, size_t size)`: the rustc-demangle crate's
//! reading of a Rust symbol (legacy `_ZN...17h<hash>E` or v0 `_R...`), without its hash, into `out` (NUL
//! ended); 1 when it is a Rust symbol and fits, else 0 and `out` unspecified. The collector's only use of Rust
//! (collector/stacks.c, symbol_dup). Its crate-type `staticlib` makes no rlib the C API crate could be used
//! through, so the crate's own C API is restated here.
use std::ffi::CStr;
use std::io::Write;
use std::os::raw::{c_char, c_int};

/// # Safety
/// `symbol` is a NUL-ended string and `out` holds `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn spinscope_rust_demangle(symbol: *const c_char, out: *mut c_char, size: usize) -> c_int {
    // Debian 12's rustc (1.63, scripts/setup.sh's `cargo` where no newer one is installed) builds this.
    let name = match CStr::from_ptr(symbol).to_str().map(rustc_demangle::try_demangle) {
        Ok(Ok(name)) => name,
        _ => return 0,
    };
    let mut buffer = std::slice::from_raw_parts_mut(out as *mut u8, size);
    c_int::from(write!(buffer, "{:#}\0", name).is_ok())
}
