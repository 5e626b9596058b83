package giemetrics

import "sync"

// Label bounds (upstream's, llm-d router v0.10): model names and fairness
// ids are the clients' to choose, so each label keeps its first
// MaxLabelValues distinct values and writes the rest as OtherLabelValue.
const (
	MaxLabelValues  = 1000
	OtherLabelValue = "other"
)

// BoundedLabel admits at most limit distinct values of a label; a value
// once admitted stays admitted, the empty value is always admitted. It is
// safe for concurrent use.
type BoundedLabel struct {
	mu    sync.Mutex
	limit int
	seen  map[string]struct{}
}

// NewBoundedLabel returns a label admitting limit distinct values.
func NewBoundedLabel(limit int) *BoundedLabel {
	return &BoundedLabel{limit: limit, seen: map[string]struct{}{}}
}

// Value is v if it is admitted (now or before), else OtherLabelValue.
func (b *BoundedLabel) Value(v string) string {
	if v == "" {
		return v
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.seen[v]; ok {
		return v
	}
	if len(b.seen) >= b.limit {
		return OtherLabelValue
	}
	b.seen[v] = struct{}{}
	return v
}

// Forget drops v (its series were deleted), making room for another.
func (b *BoundedLabel) Forget(v string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.seen, v)
}
