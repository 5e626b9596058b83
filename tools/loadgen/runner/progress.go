package runner

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

const progressWidth = 30

// Progress redraw intervals: a terminal gets a bar redrawn in place, a
// file or pipe a line now and then.
const (
	terminalRedraw = 250 * time.Millisecond
	lineInterval   = 10 * time.Second
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress reports how the run goes until stop closes.
func (r *run) progress(total int, stop <-chan struct{}) {
	if r.o.Progress == nil {
		return
	}
	term := isTerminal(r.o.Progress)
	every, end := lineInterval, "\n"
	if term {
		every, end = terminalRedraw, ""
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			r.drawProgress(total, term)
			fmt.Fprintln(r.o.Progress)
			return
		case <-tick.C:
			r.drawProgress(total, term)
			fmt.Fprint(r.o.Progress, end)
		}
	}
}

func (r *run) drawProgress(total int, term bool) {
	done, failed := int(r.done.Load()), int(r.fail.Load())
	filled := progressWidth
	if total > 0 {
		filled = done * progressWidth / total
	}
	elapsed := time.Since(r.start)
	lead := ""
	if term {
		lead = "\r"
	}
	fmt.Fprintf(r.o.Progress, "%s[%s%s] %d/%d done, %d failed, %.1fs simulated (%.1fs wall)  ",
		lead, strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled), done, total, failed, r.sim(elapsed), elapsed.Seconds())
}
