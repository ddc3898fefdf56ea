package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// targets decides which processes are profiled: the PIDs given and, with
// children on, their descendants (e.g. gunicorn's workers under its master).
// Each PID is decided once, when the profiler first asks about it.
type targets struct {
	roots    map[int64]bool
	children bool
	mu       sync.Mutex
	decided  map[int64]bool
}

func newTargets(roots map[int64]bool, children bool) *targets {
	return &targets{roots: roots, children: children, decided: map[int64]bool{}}
}

func (t *targets) match(pid int64) bool {
	if t.roots[pid] {
		return true
	}
	if !t.children {
		return false
	}
	t.mu.Lock()
	v, ok := t.decided[pid]
	t.mu.Unlock()
	if ok {
		return v
	}
	v = false
	p := pid
	for i := 0; i < 32 && p > 1; i++ {
		p = parentOf(p)
		if t.roots[p] {
			v = true
			break
		}
	}
	t.mu.Lock()
	t.decided[pid] = v
	t.mu.Unlock()
	return v
}

// present lists the targets alive now: the roots and, with children on,
// every process descending from one.
func (t *targets) present() []int64 {
	var out []int64
	for pid := range t.roots {
		out = append(out, pid)
	}
	if !t.children {
		return out
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.ParseInt(e.Name(), 10, 64)
		if err == nil && !t.roots[pid] && t.match(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func parentOf(pid int64) int64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(st)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.ParseInt(f[1], 10, 64)
	return pp
}
