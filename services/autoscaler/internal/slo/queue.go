package slo

import "fmt"

// Queue is a replica's admission limits: at most MaxBatch requests are
// served at once (vLLM's max_num_seqs) and at most MaxQueue wait. The
// chain's capacity is K = MaxBatch + MaxQueue.
type Queue struct {
	// MaxBatch is N, the maximum batch size (>= 1).
	MaxBatch int `json:"maxBatch"`
	// MaxQueue is the maximum number of waiting requests (>= 0).
	MaxQueue int `json:"maxQueue"`
}

// States returns K = MaxBatch + MaxQueue, the chain's largest state.
func (q Queue) States() int { return q.MaxBatch + q.MaxQueue }

// Validate reports whether the limits are in the model's domain:
// MaxBatch in [1, LimitBatch], MaxQueue in [0, LimitQueue].
func (q Queue) Validate() error {
	if q.MaxBatch < 1 || q.MaxBatch > LimitBatch {
		return fmt.Errorf("%w: max batch %d not in [1, %d]", ErrInvalidQueue, q.MaxBatch, LimitBatch)
	}
	if q.MaxQueue < 0 || q.MaxQueue > LimitQueue {
		return fmt.Errorf("%w: max queue %d not in [0, %d]", ErrInvalidQueue, q.MaxQueue, LimitQueue)
	}
	return nil
}
