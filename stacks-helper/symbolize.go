package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// symbolizer names native frames, which the profiler leaves to a backend:
// the function symbol that covers the ELF virtual address, from .symtab or,
// if the file is stripped, from .dynsym or a /usr/lib/debug/.build-id file.
// One lookup table per file, built on first use; at most one frame per unique
// stack is looked up, when the output is written.
type symbolizer struct {
	mu     sync.Mutex
	paths  map[int64]map[string]string // pid -> mapping base name -> path
	tables map[string]*symTable        // path (or build id) -> symbols
}

type sym struct {
	addr, size uint64
	name       string
}

type symTable struct{ syms []sym }

func newSymbolizer() *symbolizer {
	return &symbolizer{paths: map[int64]map[string]string{}, tables: map[string]*symTable{}}
}

// refresh reads /proc/PID/maps: which file each mapped base name stands for.
func (s *symbolizer) refresh(pid int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		p := strings.Join(fields[5:], " ")
		base := filepath.Base(p)
		if _, ok := m[base]; !ok {
			m[base] = p
		}
	}
	s.mu.Lock()
	old := s.paths[pid]
	for k, v := range old { // keep what has been unmapped since
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	s.paths[pid] = m
	s.mu.Unlock()
}

// prune forgets the mappings of processes gone (the targets' children come
// and go for as long as a live helper runs); the targets' own are kept.
func (s *symbolizer) prune(keep []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := map[int64]bool{}
	for _, p := range keep {
		kept[p] = true
	}
	for pid := range s.paths {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil && !kept[pid] {
			delete(s.paths, pid)
		}
	}
}

func (s *symbolizer) lookup(pid int64, module, buildID string, addr uint64) string {
	s.mu.Lock()
	path, ok := s.paths[pid][module]
	s.mu.Unlock()
	if !ok {
		s.refresh(pid)
		s.mu.Lock()
		path, ok = s.paths[pid][module]
		s.mu.Unlock()
		if !ok {
			return ""
		}
	}
	t := s.table(pid, path, buildID)
	return t.find(addr)
}

func (s *symbolizer) table(pid int64, path, buildID string) *symTable {
	key := path + "\x00" + buildID
	s.mu.Lock()
	t, ok := s.tables[key]
	s.mu.Unlock()
	if ok {
		return t
	}
	t = &symTable{}
	// The target's own view of the file first (containers), then the host's.
	candidates := []string{fmt.Sprintf("/proc/%d/root%s", pid, path), path}
	for _, c := range candidates {
		if syms, full := readSyms(c); len(syms) > 0 {
			t.syms = syms
			if !full && len(buildID) > 2 {
				dbg := fmt.Sprintf("/usr/lib/debug/.build-id/%s/%s.debug", buildID[:2], buildID[2:])
				if more, _ := readSyms(dbg); len(more) > 0 {
					t.syms = more
				}
			}
			break
		}
	}
	sort.Slice(t.syms, func(i, j int) bool { return t.syms[i].addr < t.syms[j].addr })
	s.mu.Lock()
	s.tables[key] = t
	s.mu.Unlock()
	return t
}

// readSyms returns the function symbols of an ELF file; full is true when
// they came from .symtab (local functions included).
func readSyms(path string) (out []sym, full bool) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	add := func(ss []elf.Symbol) {
		for _, x := range ss {
			if elf.ST_TYPE(x.Info) != elf.STT_FUNC || x.Value == 0 || x.Name == "" {
				continue
			}
			out = append(out, sym{addr: x.Value, size: x.Size, name: x.Name})
		}
	}
	if ss, err := f.Symbols(); err == nil && len(ss) > 0 {
		add(ss)
		full = true
	}
	if ss, err := f.DynamicSymbols(); err == nil {
		add(ss)
	}
	return out, full
}

func (t *symTable) find(addr uint64) string {
	i := sort.Search(len(t.syms), func(i int) bool { return t.syms[i].addr > addr }) - 1
	// Several symbols may share an address (aliases): any covering one will do.
	for ; i >= 0; i-- {
		x := t.syms[i]
		if addr < x.addr {
			continue
		}
		if addr < x.addr+x.size || (x.size == 0 && addr-x.addr < 256) {
			return x.name
		}
		if i > 0 && t.syms[i-1].addr == x.addr {
			continue
		}
		break
	}
	return ""
}
