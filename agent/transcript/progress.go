package transcript

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

type progressMode int

const (
	progressOff   progressMode = iota
	progressLines              // a line every 15 s (stderr is not a terminal)
	progressLive               // a live line redrawn every second
)

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// startTicker reports a run call that takes a while: on a terminal a live
// elapsed-time line (erased when the call ends), elsewhere a line every 15
// seconds, both on stderr so that the transcript on stdout stays clean.
func (o *Writer) startTicker() {
	o.mu.Lock()
	defer o.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	o.stopTick, o.tickDone = stop, done
	start := time.Now()
	live := o.progress == progressLive
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-stop:
				if drawn {
					fmt.Fprint(o.errw, "\r\033[K")
				}
				return
			case <-t.C:
				secs := int(time.Since(start).Seconds())
				switch {
				case live && secs >= 2:
					fmt.Fprintf(o.errw, "\r     run: still executing, %ds", secs)
					drawn = true
				case !live && secs > 0 && secs%15 == 0:
					fmt.Fprintf(o.errw, "     run: still executing after %ds\n", secs)
				}
			}
		}
	}()
}

func (o *Writer) stopTicker() {
	o.mu.Lock()
	stop, done := o.stopTick, o.tickDone
	o.stopTick, o.tickDone = nil, nil
	o.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
