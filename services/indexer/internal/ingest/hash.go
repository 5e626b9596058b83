package ingest

import "github.com/cespare/xxhash/v2"

func payloadHash(p []byte) uint64 { return xxhash.Sum64(p) }
