package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/reporter/samples"
	"go.opentelemetry.io/ebpf-profiler/times"
	"go.opentelemetry.io/ebpf-profiler/traceutil"
)

// stackKey identifies one unique (tid, stack).
type stackKey struct {
	pid, tid int64
	hash     libpf.TraceHash
}

type stackEntry struct {
	comm   string
	frames libpf.Frames
	count  int64
	ts     []int64
	kt     []int64 // the same moments on CLOCK_MONOTONIC (bpf_ktime_get_ns), for spinscope's tag timeline
}

// sink is the profiler's reporter: it receives every unwound trace of every
// process and keeps those of the target PIDs, between begin() and end().
type sink struct {
	targets   *targets
	pidList   []int64
	maxStacks int
	withTS    bool
	sym       *symbolizer
	meters    *countingMeterProvider
	minAge    time.Duration

	mu        sync.Mutex
	startedNs int64 // 0 until begin(): traces before it are ignored
	endedNs   int64 // 0 until end(): traces stamped after it are ignored
	stacks    map[stackKey]*stackEntry
	order     []stackKey
	samples   int64 // target samples kept
	capped    int64 // target samples not kept: unique-stack cap reached
	other     int64 // samples of other processes in the window
	early     int64 // target samples before begin() or after end()
}

func newSink(tg *targets, list []int64, maxStacks int, withTS bool) *sink {
	return &sink{
		targets: tg, pidList: list, maxStacks: maxStacks, withTS: withTS,
		sym:    newSymbolizer(),
		meters: newCountingMeterProvider(),
		stacks: map[stackKey]*stackEntry{},
	}
}

// reporter.Reporter
func (s *sink) Start(context.Context) error { return nil }
func (s *sink) Stop()                       {}

func (s *sink) begin() {
	s.mu.Lock()
	s.startedNs = time.Now().UnixNano()
	s.mu.Unlock()
	// Learn the targets' mappings while they are surely alive.
	for _, p := range s.pidList {
		s.sym.refresh(p)
	}
}

func (s *sink) end() {
	s.mu.Lock()
	s.endedNs = time.Now().UnixNano()
	s.mu.Unlock()
}

func (s *sink) ReportTraceEvent(trace *libpf.Trace, meta *samples.TraceEventMeta) error {
	pid := int64(meta.PID)
	ts := int64(meta.Timestamp)
	s.mu.Lock()
	defer s.mu.Unlock()
	inWindow := s.startedNs != 0 && ts >= s.startedNs && (s.endedNs == 0 || ts <= s.endedNs)
	if !s.targets.match(pid) {
		if inWindow {
			s.other++
		}
		return nil
	}
	if !inWindow {
		s.early++
		return nil
	}
	key := stackKey{pid: pid, tid: int64(meta.TID), hash: traceutil.HashTrace(trace)}
	e := s.stacks[key]
	if e == nil {
		if len(s.stacks) >= s.maxStacks {
			s.capped++
			return nil
		}
		e = &stackEntry{frames: trace.Frames}
		s.stacks[key] = e
		s.order = append(s.order, key)
	}
	e.comm = meta.Comm.String()
	e.count++
	if s.withTS {
		e.ts = append(e.ts, ts)
		// The profiler made ts from the sample's bpf_ktime_get_ns plus its boot-time offset (times.KTime's
		// UnixNano): the same offset taken back gives the kernel's clock, which spinscope's probes stamp.
		e.kt = append(e.kt, ts-times.KTime(0).UnixNano())
	}
	s.samples++
	return nil
}

// ---- output ----

type header struct {
	Helper         string           `json:"helper"`
	Version        string           `json:"version"`
	Hz             int              `json:"hz"`
	Samples        int64            `json:"samples"`
	Lost           int64            `json:"lost"`
	StartedNs      int64            `json:"started_ns"`
	EndedNs        int64            `json:"ended_ns"`
	Clock          string           `json:"clock"`
	PIDs           []int64          `json:"pids"`
	PIDsSampled    []int64          `json:"pids_sampled"`
	Stacks         int              `json:"stacks"`
	SamplesCapped  int64            `json:"samples_capped"`
	SamplesOther   int64            `json:"samples_other_processes"`
	SamplesOutside int64            `json:"samples_outside_window"`
	LostDetail     map[string]int64 `json:"lost_detail"`
	MinAgeS        float64          `json:"min_process_age_s"`
}

type frameOut struct {
	Kind   string  `json:"kind"`
	Name   string  `json:"name"`
	File   *string `json:"file"`
	Line   *int64  `json:"line"`
	Module *string `json:"module"`
	Offset *uint64 `json:"offset"`
}

type stackOut struct {
	PID    int64      `json:"pid"`
	TID    int64      `json:"tid"`
	Comm   string     `json:"comm"`
	Count  int64      `json:"count"`
	Frames []frameOut `json:"frames"`
	TS     []int64    `json:"ts,omitempty"`
	KT     []int64    `json:"kt,omitempty"`
}

func (s *sink) write(w io.Writer, helper, version string, hz int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lost, detail := s.meters.lost()
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	h := header{
		Helper: helper, Version: version, Hz: hz,
		Samples: s.samples, Lost: lost, LostDetail: detail,
		StartedNs: s.startedNs, EndedNs: s.endedNs, Clock: "realtime",
		PIDs: s.pidList, Stacks: len(s.stacks), SamplesCapped: s.capped, SamplesOther: s.other, SamplesOutside: s.early, MinAgeS: s.minAge.Seconds(),
	}
	seen := map[int64]bool{}
	for _, k := range s.order {
		if !seen[k.pid] {
			seen[k.pid] = true
			h.PIDsSampled = append(h.PIDsSampled, k.pid)
		}
	}
	sort.Slice(h.PIDsSampled, func(i, j int) bool { return h.PIDsSampled[i] < h.PIDsSampled[j] })
	if err := enc.Encode(h); err != nil {
		return err
	}
	keys := append([]stackKey(nil), s.order...)
	sort.SliceStable(keys, func(i, j int) bool { return s.stacks[keys[i]].count > s.stacks[keys[j]].count })
	for _, k := range keys {
		e := s.stacks[k]
		so := stackOut{PID: k.pid, TID: k.tid, Comm: e.comm, Count: e.count, TS: e.ts, KT: e.kt,
			Frames: make([]frameOut, 0, len(e.frames))}
		for _, fh := range e.frames {
			so.Frames = append(so.Frames, s.convertFrame(k.pid, fh.Value()))
		}
		if err := enc.Encode(so); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func kindOf(t libpf.FrameType) string {
	if t.IsError() {
		return "error"
	}
	switch t.Interpreter() {
	case libpf.Python:
		return "python"
	case libpf.Native:
		return "native"
	case libpf.Kernel:
		return "kernel"
	case libpf.HotSpot:
		return "jvm"
	case libpf.Go:
		return "go"
	case libpf.V8:
		return "node"
	case libpf.UnknownInterp:
		return "unknown"
	}
	return t.Interpreter().String()
}

// convertFrame names every frame: a native frame the profiler left unnamed is
// looked up in the ELF symbol tables, else shown as module+0xoffset.
func (s *sink) convertFrame(pid int64, f libpf.Frame) frameOut {
	fo := frameOut{Kind: kindOf(f.Type), Name: f.FunctionName.String()}
	if f.Type.IsError() {
		// AddressOrLineno holds the unwinder's error code.
		fo.Name = fmt.Sprintf("[unwind error %d in %s]", uint64(f.AddressOrLineno), f.Type.Interpreter())
		return fo
	}
	fo.File = strp(f.SourceFile.String())
	if f.SourceLine != 0 {
		l := int64(f.SourceLine)
		fo.Line = &l
	}
	var module, buildID string
	if f.Mapping.Valid() {
		file := f.Mapping.Value().File.Value()
		module = file.FileName.String()
		buildID = file.GnuBuildID
	}
	switch f.Type.Interpreter() {
	case libpf.Native, libpf.Kernel, libpf.Go:
		off := uint64(f.AddressOrLineno)
		fo.Offset = &off
		if module == "" && f.Type.Interpreter() == libpf.Kernel {
			module = "vmlinux"
		}
		fo.Module = strp(module)
		if fo.Name == "" && f.Type.Interpreter() == libpf.Native && module != "" {
			fo.Name = s.sym.lookup(pid, module, buildID, off)
		}
		if fo.Name == "" {
			m := module
			if m == "" {
				m = "?"
			}
			fo.Name = fmt.Sprintf("%s+0x%x", m, off)
		}
	default:
		fo.Module = strp(module)
		if fo.Name == "" {
			fo.Name = fmt.Sprintf("[unsymbolized %s frame]", fo.Kind)
		}
	}
	return fo
}

// ---- counters from the profiler's metrics ----

// countingMeterProvider hands the profiler Int64Counters that add up in
// memory; the "lost" ones go to the header. Everything else is a no-op.
type countingMeterProvider struct {
	noop.MeterProvider
	mu     sync.Mutex
	counts map[string]int64
}

func newCountingMeterProvider() *countingMeterProvider {
	return &countingMeterProvider{counts: map[string]int64{}}
}

func (p *countingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return countingMeter{p: p}
}

func (p *countingMeterProvider) lost() (int64, map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total int64
	detail := map[string]int64{}
	for name, v := range p.counts {
		if strings.Contains(name, "lost") {
			total += v
			detail[name] = v
		}
	}
	return total, detail
}

type countingMeter struct {
	noop.Meter
	p *countingMeterProvider
}

func (m countingMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return &countingCounter{p: m.p, name: name}, nil
}

type countingCounter struct {
	noop.Int64Counter
	p    *countingMeterProvider
	name string
}

func (c *countingCounter) Add(_ context.Context, v int64, _ ...metric.AddOption) {
	c.p.mu.Lock()
	c.p.counts[c.name] += v
	c.p.mu.Unlock()
}
