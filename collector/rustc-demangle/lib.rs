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
    let Ok(symbol) = CStr::from_ptr(symbol).to_str() else { return 0 };
    let Ok(name) = rustc_demangle::try_demangle(symbol) else { return 0 };
    let mut buffer = std::slice::from_raw_parts_mut(out.cast::<u8>(), size);
    c_int::from(write!(buffer, "{name:#}\0").is_ok())
}
