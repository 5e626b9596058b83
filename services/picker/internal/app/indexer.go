package app

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tokenizer"
)

// indexerClient is precise-prefix-cache-scorer's view of hermod-indexer.
type indexerClient struct {
	c    indexerv1.IndexerServiceClient
	pool string
}

// Score implements preciseprefix.Indexer.
func (i indexerClient) Score(ctx context.Context, req *indexerv1.ScoreRequest) (*indexerv1.ScoreResponse, error) {
	req.Pool = i.pool
	return i.c.Score(ctx, req)
}

// pluginServices are the services the picker provides to plugins: the
// indexer client (with --indexer-address) and the tokenizer override
// (--tokenizer). The returned close releases the connection.
func (a *app) pluginServices() ([]scheduling.Option, func(), error) {
	var opts []scheduling.Option
	closeFn := func() {}
	if addr := a.cfg.IndexerAddress; addr != "" {
		// with tracing, each Score is a client span under the scheduling
		// cycle's, and the indexer's server span is its child
		conn, err := grpc.NewClient(addr, a.boot.GRPCDialOptions()...)
		if err != nil {
			return nil, nil, fmt.Errorf("--indexer-address: %w", err)
		}
		closeFn = func() { _ = conn.Close() }
		opts = append(opts, preciseprefix.IndexerService.Provide(indexerClient{c: indexerv1.NewIndexerServiceClient(conn), pool: a.cfg.Pool}))
	}
	switch a.cfg.Tokenizer {
	case "":
	case preciseprefix.BuiltinModel:
		opts = append(opts, preciseprefix.TokenizerService.Provide(preciseprefix.Fixed{Tok: tokenizer.Builtin{}, Tmpl: tokenizer.Llama3Template{}}))
	default:
		closeFn()
		return nil, nil, fmt.Errorf("--tokenizer: %q is not a tokenizer override (empty: the config's, or %q)", a.cfg.Tokenizer, preciseprefix.BuiltinModel)
	}
	return opts, closeFn, nil
}
