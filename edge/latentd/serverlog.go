package latentd

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The HTTP server's own log (TLS handshake, HTTP/2 and accept errors)
// goes through the node's slog logger, in its format, and any client can
// cause a line (one per failed handshake), so it is rate-limited: a
// bucket of serverLogBurst lines, refilled at serverLogPerSecond. A line
// past the bucket is counted, not written, and the next line written
// says how many were left out. A line is cut to serverLogLineBytes.
const (
	serverLogBurst     = 20
	serverLogPerSecond = 1
	serverLogLineBytes = 512
)

// serverLog is the http.Server's ErrorLog writer. Fields up to mu never
// change after newServerLog (now is replaced by tests before serving).
type serverLog struct {
	logger *slog.Logger
	lines  *prometheus.CounterVec
	now    func() time.Time

	mu         sync.Mutex
	tokens     float64   // lines the bucket holds; guarded by mu
	last       time.Time // when tokens was last refilled; guarded by mu
	suppressed int64     // lines left out since the last one written; guarded by mu
}

func newServerLog(logger *slog.Logger, registry *prometheus.Registry) (*serverLog, error) {
	s := &serverLog{logger: logger, now: time.Now, tokens: serverLogBurst,
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_node_server_log_lines_total",
			Help: "Lines of the HTTP server's own log (TLS handshake, HTTP/2, accept errors): logged, or suppressed by the rate limit."},
			[]string{"result"})}
	s.lines.WithLabelValues("logged")
	s.lines.WithLabelValues("suppressed")
	if err := registry.Register(s.lines); err != nil {
		return nil, err
	}
	return s, nil
}

// errorLog is the *log.Logger an http.Server writes its errors to.
func (s *serverLog) errorLog() *log.Logger { return log.New(s, "", 0) }

// Write takes one line of the server's log (log.Logger writes each
// message in one call).
func (s *serverLog) Write(p []byte) (int, error) {
	suppressed, ok := s.take(s.now())
	if !ok {
		s.lines.WithLabelValues("suppressed").Inc()
		return len(p), nil
	}
	line := strings.TrimSpace(string(p))
	if len(line) > serverLogLineBytes {
		line = line[:serverLogLineBytes] + "..."
	}
	attrs := []slog.Attr{slog.String("err", line)}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("suppressed", suppressed))
	}
	s.lines.WithLabelValues("logged").Inc()
	s.logger.LogAttrs(context.Background(), slog.LevelWarn, "latentd: http server", attrs...)
	return len(p), nil
}

// take refills the bucket for the time since the last line and takes one
// line from it; ok is false when it is empty. suppressed is how many
// lines were left out before this one, when it may be written.
func (s *serverLog) take(now time.Time) (suppressed int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if elapsed := now.Sub(s.last); elapsed > 0 {
		s.tokens = min(serverLogBurst, s.tokens+elapsed.Seconds()*serverLogPerSecond)
	}
	// A clock that goes backwards refills nothing, and is not kept.
	if now.After(s.last) {
		s.last = now
	}
	if s.tokens < 1 {
		s.suppressed++
		return 0, false
	}
	s.tokens--
	suppressed, s.suppressed = s.suppressed, 0
	return suppressed, true
}
