package app

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/services/indexer/internal/projection"
)

// IndexState is what /debug/index reports: replicas that applied the same
// stream have the same digest.
type IndexState struct {
	StreamSequence uint64      `json:"stream_sequence"`
	Keys           int         `json:"keys"`
	Evicted        uint64      `json:"evicted"`
	Digest         string      `json:"digest"`
	Applied        index.Stats `json:"applied"`
}

func indexState(p *projection.Projector) IndexState {
	// the sequence first: the digest covers at least that much
	seq := p.StreamSequence()
	idx := p.Index()
	return IndexState{
		StreamSequence: seq, Keys: idx.Len(), Evicted: idx.Evicted(),
		Digest: strconv.FormatUint(idx.Digest(), 16), Applied: p.Stats(),
	}
}

// debugHandler serves /debug/index beside the ops endpoints.
func debugHandler(ops http.Handler, p *projection.Projector) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", ops)
	mux.HandleFunc("GET /debug/index", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(indexState(p))
	})
	return mux
}
