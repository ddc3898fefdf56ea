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
	"go.opentelemetry.io/ebpf-profiler/metrics"
	"go.opentelemetry.io/ebpf-profiler/reporter"
)

const helperName = "otel-ebpf-profiler"

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
	maxStacks := flag.Int("max-stacks", 20000, "cap on unique (tid, stack) entries; samples beyond it are counted, not kept")
	timestamps := flag.Bool("timestamps", false, "add \"ts\": sample times (unix ns) to each stack line")
	verbose := flag.Bool("verbose", false, "log the profiler's info messages to stderr")
	flag.Parse()

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

	s := newSink(pidSet, pidList, *maxStacks, *timestamps)

	level := zapcore.WarnLevel
	if *verbose {
		level = zapcore.InfoLevel
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
	cfg.MonitorInterval = 2 * time.Second
	cfg.IncludeEnvVars = "" // never collect environment variables
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
	startErr := make(chan error, 1)
	go func() { startErr <- rcv.Start(ctx, nil) }()
	select {
	case err := <-startErr:
		if err != nil {
			die("profiler failed to start: %v", err)
		}
	case <-sigs:
		// Interrupted while loading: write an empty result and leave.
		s.begin()
		s.end()
		finish(s, outFile, *hz)
		os.Exit(0)
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
