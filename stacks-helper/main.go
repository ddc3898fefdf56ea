// spinscope-stacks-helper: on-CPU stack samples of one process (CPython,
// HotSpot, Go, native, kernel frames) for spinscope's --stacks mode.
//
// It embeds the OpenTelemetry eBPF profiler (go.opentelemetry.io/ebpf-profiler)
// as a library: the profiler's collector receiver is built with our own
// reporter (WithReporterFactory), so every unwound trace arrives in this
// process as a function call. No OTLP, no gRPC, no second process.
//
// The profiler samples every process on the machine; the reporter keeps the
// target PID(s) only and aggregates by (tid, stack). At --duration, SIGINT
// or SIGTERM it writes FILE (JSON lines, see README.md) and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/xconsumer"
	"go.opentelemetry.io/collector/receiver"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	profiler "go.opentelemetry.io/ebpf-profiler/collector"
	"go.opentelemetry.io/ebpf-profiler/collector/config"
	"go.opentelemetry.io/ebpf-profiler/interpreter"
	"go.opentelemetry.io/ebpf-profiler/interpreter/interpreterconfig"
	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/metrics"
	"go.opentelemetry.io/ebpf-profiler/reporter"
	"go.opentelemetry.io/ebpf-profiler/tracer"
)

const helperName = "otel-ebpf-profiler"

// firstSyncTimeout bounds the wait for the targets' first load (measured 0.3 s
// quiet, up to 3.5 s beside two CPU hogs on 2 CPUs, for CPython and HotSpot).
const firstSyncTimeout = 15 * time.Second

// The profiler module's version, from the build info (the pinned version the
// build script asked for; the replace directive keeps the version string).
func profilerVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == "go.opentelemetry.io/ebpf-profiler" {
			return d.Version + "+spinscope-patch"
		}
	}
	return "unknown"
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "spinscope-stacks-helper: "+format+"\n", args...)
	os.Exit(1)
}

func parsePIDs(s string) (map[int64]bool, []int64, error) {
	set := map[int64]bool{}
	var list []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v <= 0 {
			return nil, nil, fmt.Errorf("bad --pid %q", f)
		}
		if !set[v] {
			set[v] = true
			list = append(list, v)
		}
	}
	if len(list) == 0 {
		return nil, nil, errors.New("--pid is required")
	}
	return set, list, nil
}

func main() {
	pidArg := flag.String("pid", "", "target process id(s), comma-separated (threads are kept by tid)")
	hz := flag.Int("hz", 99, "samples per second per CPU (cpu-clock)")
	duration := flag.Float64("duration", 0, "seconds to sample after the profiler is attached (0: until SIGINT/SIGTERM)")
	out := flag.String("out", "", "output file (JSON lines); '-' for stdout")
	children := flag.Bool("children", true, "also profile the targets' descendant processes")
	allProcs := flag.Bool("all-processes", false, "let the profiler unwind every process (the upstream default; costs more), still keeping only the targets' samples")
	maxStacks := flag.Int("max-stacks", 20000, "cap on unique (tid, stack) entries; samples beyond it are counted, not kept")
	timestamps := flag.Bool("timestamps", false, "add \"ts\" and \"kt\": sample times (unix ns, and CLOCK_MONOTONIC ns) to each stack line")
	minAge := flag.String("min-process-age", "auto", "skip (in BPF, before any unwinding or process sync) "+
		"samples of processes younger than this: 'auto' = 0 with --children (a child forked during the "+
		"capture is sampled from its start), else the youngest target's age minus 1s; or a duration such "+
		"as 30s, or 0 for every process")
	exitWithParent := flag.Bool("exit-with-parent", false, "exit at once (SIGKILL, PR_SET_PDEATHSIG) when the "+
		"process that started the helper dies, as when `spinscope record` is killed")
	unwind := flag.String("runtime", "all", "the interpreter unwinders to load: python, hotspot, v8 or all "+
		"(one is cheaper to load and to match against each process's mappings)")
	cpuProfile := flag.String("cpuprofile", "", "write the helper's own Go CPU profile here (for measuring the helper)")
	verbose := flag.Bool("verbose", false, "log the profiler's info messages to stderr")
	debugLog := flag.Bool("debug", false, "log the profiler's debug messages to stderr")
	flag.Parse()
	if *exitWithParent {
		exitWithParentProcess()
	}

	pidSet, pidList, err := parsePIDs(*pidArg)
	if err != nil {
		die("%v", err)
	}
	if *out == "" {
		die("--out is required")
	}
	if *hz < 1 || *hz > 1000 {
		die("--hz must be within 1..1000")
	}
	if *duration < 0 {
		die("--duration must be >= 0")
	}
	for _, p := range pidList {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
			die("no process %d", p)
		}
	}
	// Open the output before loading anything: a bad path fails fast.
	var outFile *os.File
	if *out == "-" {
		outFile = os.Stdout
	} else if outFile, err = os.Create(*out); err != nil {
		die("cannot create --out: %v", err)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			die("cannot create --cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			die("cpuprofile: %v", err)
		}
	}

	tg := newTargets(pidSet, *children)
	if !*allProcs {
		// Our patch: the profiler loads mappings and unwind tables only for
		// the targets; other processes are dropped in BPF before unwinding.
		tracer.SynchronizeFilter = func(pid libpf.PID) bool { return tg.match(int64(pid)) }
	}
	// Our patch too: the targets are loaded before sampling begins, not when BPF
	// first meets them (seconds later on a busy host).
	for _, pid := range tg.present() {
		tracer.SynchronizeFirst = append(tracer.SynchronizeFirst, libpf.PID(pid))
	}
	s := newSink(tg, pidList, *maxStacks, *timestamps)

	level := zapcore.WarnLevel
	if *verbose {
		level = zapcore.InfoLevel
	}
	if *debugLog {
		level = zapcore.DebugLevel
	}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = zap.NewAtomicLevelAt(level)
	zcfg.Encoding = "console"
	zcfg.OutputPaths = []string{"stderr"}
	zcfg.ErrorOutputPaths = []string{"stderr"}
	zcfg.DisableStacktrace = true
	zcfg.Sampling = nil
	logger, err := zcfg.Build()
	if err != nil {
		die("logger: %v", err)
	}

	cfg := profiler.NewFactory().CreateDefaultConfig().(*config.Config)
	cfg.SamplesPerSecond = *hz
	cfg.SendErrorFrames = true // a frame that failed to unwind is shown, not dropped
	cfg.ReporterInterval = time.Hour
	cfg.IncludeEnvVars = "" // never collect environment variables
	if cfg.Interpreters, err = interpreters(*unwind); err != nil {
		die("%v", err)
	}
	age, err := minProcessAge(*minAge, pidList, *children)
	if err != nil {
		die("%v", err)
	}
	cfg.FilterMinProcessAge = age
	s.minAge = age
	if err := cfg.Validate(); err != nil {
		die("config: %v", err)
	}

	settings := receiver.Settings{
		ID: component.MustNewID("profiling"),
		TelemetrySettings: component.TelemetrySettings{
			Logger:         logger,
			TracerProvider: tracenoop.NewTracerProvider(),
			MeterProvider:  s.meters,
		},
		BuildInfo: component.NewDefaultBuildInfo(),
	}
	create := profiler.BuildProfilesReceiver(profiler.WithReporterFactory(
		func(_ *reporter.Config, _ xconsumer.Profiles) (reporter.Reporter, error) { return s, nil }))

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)

	ctx := context.Background()
	rcv, err := create(ctx, settings, cfg, nil)
	if err != nil {
		die("profiler: %v", err)
	}
	// Interrupted while loading: an empty result, and leave.
	interrupted := func() {
		s.begin()
		s.end()
		finish(s, outFile, *hz)
		os.Exit(0)
	}
	startErr := make(chan error, 1)
	go func() { startErr <- rcv.Start(ctx, nil) }()
	select {
	case err := <-startErr:
		if err != nil {
			die("profiler failed to start: %v", err)
		}
	case <-sigs:
		interrupted()
	}

	// The targets' mappings and unwind tables are loaded before sampling is
	// said to begin (bounded: a target that takes longer is unwound when ready).
	select {
	case <-tracer.FirstSynchronized:
	case <-time.After(firstSyncTimeout):
	case <-sigs:
		interrupted()
	}
	s.begin()
	// The one line a caller may wait for: sampling has begun (no payload).
	fmt.Fprintf(os.Stderr, "spinscope-stacks-helper: sampling pid %s at %d Hz\n", *pidArg, *hz)
	var timer <-chan time.Time
	if *duration > 0 {
		timer = time.After(time.Duration(*duration * float64(time.Second)))
	}
	select {
	case <-timer:
	case <-sigs:
	}
	s.end()

	// Traces reach the reporter up to ~250 ms (the profiler's poll interval)
	// after they were taken; samples stamped after end() are ignored. A second
	// signal cuts the drain short.
	select {
	case <-time.After(700 * time.Millisecond):
	case <-sigs:
	}
	metrics.AddSlice(nil) // flush the profiler's buffered counters (lost events)
	finish(s, outFile, *hz)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}

	done := make(chan struct{})
	go func() { _ = rcv.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	case <-sigs:
	}
	os.Exit(0)
}

func finish(s *sink, f *os.File, hz int) {
	if err := s.write(f, helperName, profilerVersion(), hz); err != nil {
		die("writing output: %v", err)
	}
	if f != os.Stdout {
		if err := f.Close(); err != nil {
			die("writing output: %v", err)
		}
	}
}

// interpreters: the profiler's interpreter unwinders, all or only the one
// the target runs (its native, Go and kernel unwinding is always on).
func interpreters(name string) (interpreterconfig.Config, error) {
	if name == "all" {
		return interpreterconfig.AllInterpreters(), nil
	}
	cfg := interpreterconfig.NoInterpreters()
	on := interpreter.BaseConfig{}
	switch name {
	case "python":
		cfg.Python.BaseConfig = on
	case "hotspot":
		cfg.Hotspot.BaseConfig = on
	case "v8":
		cfg.V8.BaseConfig = on
	default:
		return cfg, fmt.Errorf("bad --runtime %q: python, hotspot, v8 or all", name)
	}
	return cfg, nil
}

// exitWithParentProcess: the helper is killed when the process that started
// it dies (a SIGKILLed `spinscope record` leaves no root profiler running).
// If that process died before the prctl, we are someone else's child already.
func exitWithParentProcess() {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		die("prctl(PR_SET_PDEATHSIG): %v", errno)
	}
	if os.Getppid() != parent || parent == 1 {
		die("the process that started the helper has exited")
	}
}

// minProcessAge: the profiler samples every process and, the first time it
// sees one, reads its mappings and parses the .eh_frame of every executable it
// maps. Its BPF filter_min_process_age skips samples of processes younger than
// the given age before any of that happens. Our synchronize filter
// (patches/ebpf-profiler-synchronize-filter.patch) already keeps every process
// but the targets and their descendants from being synchronized or unwound, so
// the age filter only spares non-targets a PID event each (rate-limited in
// BPF, decided once). 'auto' is 0 with children (a worker the target forks
// during the capture is sampled from its start, not skipped until it is as
// old as the target); without, the youngest target's age less a second.
func minProcessAge(arg string, pids []int64, children bool) (time.Duration, error) {
	if arg == "auto" && children {
		return 0, nil
	}
	if arg != "auto" {
		d, err := time.ParseDuration(arg)
		if err != nil && arg == "0" {
			return 0, nil
		}
		if err != nil || d < 0 {
			return 0, fmt.Errorf("bad --min-process-age %q", arg)
		}
		return d, nil
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, nil
	}
	upS, err := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err != nil {
		return 0, nil
	}
	youngest := time.Duration(-1)
	for _, p := range pids {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return 0, nil
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 20 {
			return 0, nil
		}
		ticks, err := strconv.ParseFloat(f[19], 64) // starttime, field 22
		if err != nil {
			return 0, nil
		}
		age := time.Duration((upS - ticks/100) * float64(time.Second))
		if youngest < 0 || age < youngest {
			youngest = age
		}
	}
	if youngest -= time.Second; youngest < 0 {
		return 0, nil
	}
	return youngest, nil
}
