package service

import (
	"context"

	"github.com/hermod/hermod/libs/scheduling"
)

// VerifyServed runs the served verifiers of the config in force
// (destination-endpoint-served-verifier) on a response whose headers
// reached the data plane's ext_proc server.
func (s *Server) VerifyServed(ctx context.Context, resp *scheduling.ServedResponse) {
	lease := s.o.Loader.Acquire()
	defer lease.Release()
	lease.Scheduler().VerifyServed(ctx, resp)
}
