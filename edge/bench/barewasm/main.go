// Command barewasm is the bare handler that latentd's cost of an
// invocation is measured against (docs/latentd.md, "Cost of an
// invocation"): a plain net/http server that, for every request,
// instantiates the demonstration guest (edge/latentd/demo's hello.wasm)
// on the same wazero as latentd, with the request body as WASI standard
// input and a buffer as standard output, calls _start and writes the
// output. No authentication, admission, scheduling, metering or limits,
// and nothing kept from one instance to the next (a fresh module
// configuration, linear memory and output buffer each time): only what
// running the guest itself costs, plus net/http.
//
//	go run ./bench/barewasm -listen 127.0.0.1:8081     (from edge/)
//	curl -sS --data-binary world http://127.0.0.1:8081/
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"latent.dev/admission/edge/latentd/demo"
)

// maxBody bounds a request body, as the demonstration policy bounds a
// payload.
const maxBody = 64 << 10

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "where to listen")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "barewasm:", err)
		os.Exit(1)
	}
}

// handler runs one fresh instance of the compiled guest per request.
type handler struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
}

func newHandler(ctx context.Context) (*handler, error) {
	r := wazero.NewRuntime(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		_ = r.Close(ctx)
		return nil, err
	}
	compiled, err := r.CompileModule(ctx, demo.Guest())
	if err != nil {
		_ = r.Close(ctx)
		return nil, err
	}
	return &handler{runtime: r, compiled: compiled}, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	input, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(input) > maxBody {
		http.Error(w, "the body could not be read, or is over 64 KiB", http.StatusBadRequest)
		return
	}
	var out bytes.Buffer
	// The module configuration edge/guest gives a guest, without the
	// limits: real clocks and crypto/rand (wazero's default, a seeded
	// math/rand source, would cost the bare handler a 5 KB seeding per
	// instance that latentd does not pay).
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdin(bytes.NewReader(input)).WithStdout(&out).WithStderr(io.Discard).
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	inst, err := h.runtime.InstantiateModule(r.Context(), h.compiled, cfg)
	if err != nil {
		http.Error(w, "instantiate: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, err = inst.ExportedFunction("_start").Call(r.Context())
	_ = inst.Close(r.Context())
	var exit *sys.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 0) {
		http.Error(w, "_start: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	_, _ = w.Write(out.Bytes())
}

func run(ctx context.Context, listen string) error {
	h, err := newHandler(ctx)
	if err != nil {
		return err
	}
	defer h.runtime.Close(context.Background())
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	log.Printf("barewasm: serving on http://%s", l.Addr())
	srv := &http.Server{Handler: h}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
