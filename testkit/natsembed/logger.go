package natsembed

import (
	"fmt"
	"log/slog"
)

// slogLogger passes the nats-server log to a slog.Logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Noticef(format string, v ...any) { s.l.Info(fmt.Sprintf(format, v...)) }
func (s slogLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s slogLogger) Fatalf(format string, v ...any) {
	s.l.Error(fmt.Sprintf(format, v...), "fatal", true)
}
func (s slogLogger) Errorf(format string, v ...any) { s.l.Error(fmt.Sprintf(format, v...)) }
func (s slogLogger) Debugf(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s slogLogger) Tracef(format string, v ...any) {
	s.l.Debug(fmt.Sprintf(format, v...), "trace", true)
}
