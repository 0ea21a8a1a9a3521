package latentd

import (
	"net/http"
	"time"
)

// answerWhenDone lifts the server's write deadline from an administrator
// handler's work and starts it again when the answer starts: the server's
// WriteTimeout counts from the end of the request's headers, and a deploy
// compiles for as long as its modules take (a Go guest, seconds; under
// the race detector on a loaded machine, tens of seconds). Without this
// the server would cut the connection of a deploy that still takes
// effect. The answer itself then has WriteTimeout to be written.
func (n *Node) answerWhenDone(w http.ResponseWriter) http.ResponseWriter {
	rc := http.NewResponseController(w)
	if rc.SetWriteDeadline(time.Time{}) != nil {
		// The writer cannot set deadlines (not the server's own): there
		// is none to lift.
		return w
	}
	return &deadlineWriter{ResponseWriter: w, rc: rc, timeout: n.cfg.WriteTimeout}
}

// deadlineWriter sets the connection's write deadline to timeout from
// the first WriteHeader or Write.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	armed   bool
}

func (w *deadlineWriter) arm() {
	if !w.armed {
		w.armed = true
		if w.timeout > 0 {
			_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
		}
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
