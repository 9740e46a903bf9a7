package session

import (
	"time"

	"github.com/b10x/harness/record"
)

// EndWith writes end as the record's run_end (its event and time filled
// in) and closes the session, as End does. It returns the record's
// failure: the first write of this session that could not be made (the
// run_end line's own, or an earlier one: a record that failed once takes
// no more lines), nil when the record is complete or there is none. A
// command should not report success when it is not nil: the record has a
// hole.
func (s *Session) EndWith(end record.RunEnd) error {
	var err error
	if s.rec != nil {
		end.Event, end.Time = "run_end", time.Now().UTC()
		err = s.rec.Write(end)
	}
	s.Close()
	return err
}
