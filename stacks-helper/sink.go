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

// batch holds the unique (tid, stack) entries of one interval: the whole
// sampling window in one-shot mode, one --every interval in live mode.
type batch struct {
	stacks  map[stackKey]*stackEntry
	order   []stackKey
	samples int64 // target samples kept
	capped  int64 // target samples not kept: unique-stack cap reached
}

func newBatch() *batch { return &batch{stacks: map[stackKey]*stackEntry{}} }

// tally is what the sink counted over its life; a batch's header says what
// changed since the one before.
type tally struct {
	other int64 // samples of other processes in the window
	early int64 // target samples before begin(), after end(), or of an interval already written
	lost  int64
}

// sink is the profiler's reporter: it receives every unwound trace of every
// process and keeps those of the target PIDs, between begin() and end(). With
// every > 0 it keeps one batch per interval of that length (since begin()),
// each written and dropped once its samples are in (live mode); else one
// batch for the whole window.
type sink struct {
	targets   *targets
	pidList   []int64
	maxStacks int
	withTS    bool
	every     int64 // ns; 0: one batch
	sym       *symbolizer
	meters    *countingMeterProvider
	minAge    time.Duration

	mu        sync.Mutex
	startedNs int64            // 0 until begin(): traces before it are ignored
	endedNs   int64            // 0 until end(): traces stamped after it are ignored
	batches   map[int64]*batch // interval index -> its batch (at most two at a time in live mode)
	written   int64            // live mode: intervals before this one have been written
	out       *bufio.Writer    // the output's buffer (writeBatch: one writer, from one goroutine at a time)
	counted   tally            // since begin()
	reported  tally            // as of the last batch written
}

func newSink(tg *targets, list []int64, maxStacks int, withTS bool, every time.Duration) *sink {
	return &sink{
		targets: tg, pidList: list, maxStacks: maxStacks, withTS: withTS, every: int64(every),
		sym:     newSymbolizer(),
		meters:  newCountingMeterProvider(),
		batches: map[int64]*batch{},
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

// interval: the index of the interval a sample stamped ts belongs to.
func (s *sink) interval(ts int64) int64 {
	if s.every == 0 {
		return 0
	}
	return (ts - s.startedNs) / s.every
}

func (s *sink) ReportTraceEvent(trace *libpf.Trace, meta *samples.TraceEventMeta) error {
	pid := int64(meta.PID)
	ts := int64(meta.Timestamp)
	s.mu.Lock()
	defer s.mu.Unlock()
	inWindow := s.startedNs != 0 && ts >= s.startedNs && (s.endedNs == 0 || ts <= s.endedNs)
	if !s.targets.match(pid) {
		if inWindow {
			s.counted.other++
		}
		return nil
	}
	k := s.interval(ts)
	if !inWindow || k < s.written { // an interval already written: too late for it
		s.counted.early++
		return nil
	}
	b := s.batches[k]
	if b == nil {
		b = newBatch()
		s.batches[k] = b
	}
	key := stackKey{pid: pid, tid: int64(meta.TID), hash: traceutil.HashTrace(trace)}
	e := b.stacks[key]
	if e == nil {
		if len(b.stacks) >= s.maxStacks {
			b.capped++
			return nil
		}
		e = &stackEntry{frames: trace.Frames}
		b.stacks[key] = e
		b.order = append(b.order, key)
	}
	e.comm = meta.Comm.String()
	e.count++
	if s.withTS {
		e.ts = append(e.ts, ts)
		// The profiler made ts from the sample's bpf_ktime_get_ns plus its boot-time offset (times.KTime's
		// UnixNano): the same offset taken back gives the kernel's clock, which spinscope's probes stamp.
		e.kt = append(e.kt, ts-times.KTime(0).UnixNano())
	}
	b.samples++
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
	// Live mode (--every) only: which interval this batch is, its bounds on
	// CLOCK_MONOTONIC (the "kt" clock), and whether it is the last one.
	Interval    *int64 `json:"interval,omitempty"`
	KtStartedNs *int64 `json:"kt_started_ns,omitempty"`
	KtEndedNs   *int64 `json:"kt_ended_ns,omitempty"`
	Final       *bool  `json:"final,omitempty"`
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

// write: the one-shot output, the whole window's batch (README.md, Output).
func (s *sink) write(w io.Writer, helper, version string, hz int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches[0]
	if b == nil {
		b = newBatch()
	}
	lost, detail := s.meters.lost()
	h := header{Helper: helper, Version: version, Hz: hz, Lost: lost, LostDetail: detail,
		StartedNs: s.startedNs, EndedNs: s.endedNs,
		SamplesOther: s.counted.other, SamplesOutside: s.counted.early}
	return s.writeBatch(w, b, h)
}

// writeDue (live mode): the batches of every interval that ended at least
// drain before now (all of them when final: the last one ends at end()),
// each written with its header and dropped. A batch is written for every
// interval, empty or not, so that a reader sees time pass.
func (s *sink) writeDue(w io.Writer, helper, version string, hz int, drain time.Duration, final bool) error {
	type due struct {
		b *batch
		h header
	}
	var out []due
	s.mu.Lock()
	upTo := s.interval(time.Now().UnixNano() - int64(drain)) // intervals before this one are complete
	if final {
		upTo = s.interval(s.endedNs) + 1
	}
	offset := times.KTime(0).UnixNano()
	for ; s.written < upTo; s.written++ {
		k := s.written
		b := s.batches[k]
		if b == nil {
			b = newBatch()
		}
		delete(s.batches, k)
		lost, detail := s.meters.lost()
		start, end := s.startedNs+k*s.every, s.startedNs+(k+1)*s.every
		last := final && k == upTo-1
		if last || (s.endedNs != 0 && end > s.endedNs) {
			end = s.endedNs
		}
		idx, ktStart, ktEnd := k, start-offset, end-offset
		out = append(out, due{b, header{Helper: helper, Version: version, Hz: hz, Lost: lost - s.reported.lost,
			LostDetail: detail, StartedNs: start, EndedNs: end, SamplesOther: s.counted.other - s.reported.other,
			SamplesOutside: s.counted.early - s.reported.early,
			Interval:       &idx, KtStartedNs: &ktStart, KtEndedNs: &ktEnd, Final: &last}})
		s.reported = tally{other: s.counted.other, early: s.counted.early, lost: lost}
	}
	s.mu.Unlock()
	// Written outside the lock: a slow reader holds back this writer only, not the profiler's traces.
	for _, d := range out {
		if err := s.writeBatch(w, d.b, d.h); err != nil {
			return err
		}
	}
	s.targets.prune()
	s.sym.prune(s.pidList)
	return nil
}

// nextDue (live mode): how long until the next batch is due, its interval's
// end and the drain after it.
func (s *sink) nextDue(drain time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, time.Duration(s.startedNs+(s.written+1)*s.every+int64(drain)-time.Now().UnixNano()))
}

// writeBatch: the header (h completed from b) and one line per unique (tid, stack), most samples first.
func (s *sink) writeBatch(w io.Writer, b *batch, h header) error {
	if s.out == nil { // one buffer for every batch: live mode writes one a second for hours
		s.out = bufio.NewWriterSize(w, 1<<20)
	}
	bw := s.out
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	h.Samples, h.Clock, h.PIDs, h.Stacks, h.SamplesCapped, h.MinAgeS =
		b.samples, "realtime", s.pidList, len(b.stacks), b.capped, s.minAge.Seconds()
	seen := map[int64]bool{}
	for _, k := range b.order {
		if !seen[k.pid] {
			seen[k.pid] = true
			h.PIDsSampled = append(h.PIDsSampled, k.pid)
		}
	}
	sort.Slice(h.PIDsSampled, func(i, j int) bool { return h.PIDsSampled[i] < h.PIDsSampled[j] })
	if err := enc.Encode(h); err != nil {
		return err
	}
	keys := append([]stackKey(nil), b.order...)
	sort.SliceStable(keys, func(i, j int) bool { return b.stacks[keys[i]].count > b.stacks[keys[j]].count })
	for _, k := range keys {
		e := b.stacks[k]
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
