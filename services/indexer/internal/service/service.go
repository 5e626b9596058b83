// Package service answers the IndexerService gRPC calls from the
// projected block index.
package service

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/kv/blockkey"
	"github.com/hermod/hermod/libs/kv/index"
)

// Limits of one request.
const (
	MaxTokens     = 1 << 20
	MaxBlockKeys  = 1 << 16
	MaxCandidates = 1 << 14
)

// Source is the projected index the server answers from: the replica's
// own (projection.Projector) or the pool's shared one (projection.Shared).
type Source interface {
	Keyer() *blockkey.Keyer
	Match(ctx context.Context, keys []blockkey.Key, candidates []string, now int64) ([]index.Match, error)
	Lookup(ctx context.Context, k blockkey.Key) ([]index.Holder, error)
	// StreamSequence is the stream sequence the index covers.
	StreamSequence() uint64
}

// Server serves IndexerService for one pool.
type Server struct {
	indexerv1.UnimplementedIndexerServiceServer
	pool string
	proj Source
	now  func() time.Time
}

// New returns the server of pool over proj's index.
func New(pool string, proj Source) *Server {
	return &Server{pool: pool, proj: proj, now: time.Now}
}

func (s *Server) checkPool(pool string) error {
	if pool != "" && pool != s.pool {
		return status.Errorf(codes.NotFound, "this indexer serves pool %q, not %q", s.pool, pool)
	}
	return nil
}

// Score implements IndexerService.
func (s *Server) Score(ctx context.Context, req *indexerv1.ScoreRequest) (*indexerv1.ScoreResponse, error) {
	if err := s.checkPool(req.GetPool()); err != nil {
		return nil, err
	}
	tokens, given := req.GetTokenIds(), req.GetBlockKeys()
	switch {
	case len(tokens) > 0 && len(given) > 0:
		return nil, status.Error(codes.InvalidArgument, "token_ids and block_keys: give one, not both")
	case len(tokens) > MaxTokens:
		return nil, status.Errorf(codes.InvalidArgument, "token_ids: at most %d (got %d)", MaxTokens, len(tokens))
	case len(given) > MaxBlockKeys:
		return nil, status.Errorf(codes.InvalidArgument, "block_keys: at most %d (got %d)", MaxBlockKeys, len(given))
	case len(req.GetCandidates()) > MaxCandidates:
		return nil, status.Errorf(codes.InvalidArgument, "candidates: at most %d (got %d)", MaxCandidates, len(req.GetCandidates()))
	case len(tokens) > 0 && req.GetModel() == "" && req.GetLoraName() == "":
		return nil, status.Error(codes.InvalidArgument, "model: required with token_ids (blocks chain from the model or adapter)")
	}
	idx := s.proj
	var keys []blockkey.Key
	if len(tokens) > 0 {
		root := req.GetModel()
		if req.GetLoraName() != "" {
			root = req.GetLoraName()
		}
		keys = idx.Keyer().Prompt(make([]blockkey.Key, 0, len(tokens)/idx.Keyer().BlockSize()), root, tokens)
	} else {
		keys = make([]blockkey.Key, len(given))
		for i, k := range given {
			keys[i] = blockkey.Key(k)
		}
	}
	seq := s.proj.StreamSequence()
	matches, err := idx.Match(ctx, keys, req.GetCandidates(), s.now().UnixNano())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the index: %v", err)
	}
	resp := &indexerv1.ScoreResponse{
		Scores:         make([]*indexerv1.EndpointScore, len(matches)),
		PromptBlocks:   int32(len(keys)),
		StreamSequence: seq,
	}
	for i, m := range matches {
		resp.Scores[i] = &indexerv1.EndpointScore{Endpoint: req.GetCandidates()[i], Blocks: int32(m.Blocks), Score: m.Score}
	}
	return resp, nil
}

// Lookup implements IndexerService.
func (s *Server) Lookup(ctx context.Context, req *indexerv1.LookupRequest) (*indexerv1.LookupResponse, error) {
	if err := s.checkPool(req.GetPool()); err != nil {
		return nil, err
	}
	if n := len(req.GetBlockKeys()); n > MaxBlockKeys {
		return nil, status.Errorf(codes.InvalidArgument, "block_keys: at most %d (got %d)", MaxBlockKeys, n)
	}
	resp := &indexerv1.LookupResponse{StreamSequence: s.proj.StreamSequence()}
	for _, k := range req.GetBlockKeys() {
		bh := &indexerv1.BlockHolders{BlockKey: k}
		holders, err := s.proj.Lookup(ctx, blockkey.Key(k))
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "the index: %v", err)
		}
		for _, h := range holders {
			holder := &indexerv1.Holder{Endpoint: h.Pod}
			for _, t := range h.Tiers {
				holder.Tiers = append(holder.Tiers, t.String())
			}
			bh.Holders = append(bh.Holders, holder)
		}
		resp.Blocks = append(resp.Blocks, bh)
	}
	return resp, nil
}
