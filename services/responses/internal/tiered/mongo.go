package tiered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/services/responses/internal/store"
)

// mongoTier is tier 2: a collection of documents keyed by response id.
// Expiry is a field that reads check, so it holds on servers without TTL
// indexes; where the server has them, a TTL index on it deletes expired
// documents too.
type mongoTier struct {
	client  *mongo.Client
	coll    *mongo.Collection
	timeout time.Duration
}

// document is a response in MongoDB. A deleted response stays as a
// tombstone until it expires, so a late sync of the same id cannot bring
// it back.
type document struct {
	ID         string    `bson:"_id"`
	PreviousID string    `bson:"previous_response_id,omitempty"`
	CreatedAt  time.Time `bson:"created_at"`
	ExpiresAt  time.Time `bson:"expires_at"`
	Data       []byte    `bson:"data,omitempty"`
	Deleted    bool      `bson:"deleted,omitempty"`
	// Revision is the record's (as int64: BSON has no unsigned integer).
	Revision int64 `bson:"revision,omitempty"`
	// SyncSeq orders the versions of a swapped record: the sync stream
	// entry that wrote this one (entrySeq). A swap replaces only an
	// older version, so entries applied out of order (in one unordered
	// batch, or claimed from a dead consumer) leave the newest.
	SyncSeq int64 `bson:"sync_seq,omitempty"`
}

func openMongo(ctx context.Context, c *responsestore.MongoConfig, log *slog.Logger) (*mongoTier, error) {
	opts := options.Client().ApplyURI(c.URI).SetTimeout(time.Duration(c.Timeout))
	if err := mongoSecurity(opts, c); err != nil {
		return nil, err
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("mongo.uri: %w", err)
	}
	m := &mongoTier{client: client, coll: client.Database(c.Database).Collection(c.Collection), timeout: time.Duration(c.Timeout)}
	// The TTL index, where the server has TTL indexes; reads check the
	// expiry either way. A server that is down now gets no index: the
	// next replica start creates it.
	ictx, cancel := context.WithTimeout(ctx, 5*m.timeout)
	defer cancel()
	_, err = m.coll.Indexes().CreateOne(ictx, mongo.IndexModel{
		Keys:    bson.D{{Key: "expires_at", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0).SetName("expires_at_ttl"),
	})
	if err != nil {
		log.Info("responses: no TTL index on mongodb (expiry is checked on read)", "collection", c.Collection, "err", err)
	}
	return m, nil
}

func (m *mongoTier) get(ctx context.Context, id string, now time.Time) (*value, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var d document
	err := m.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	case err != nil:
		return nil, fmt.Errorf("get %s from mongodb: %w", id, err)
	case d.Deleted:
		return nil, fmt.Errorf("%w: %s (deleted)", store.ErrNotFound, id)
	case !d.ExpiresAt.IsZero() && !now.Before(d.ExpiresAt):
		return nil, fmt.Errorf("%w: %s (expired)", store.ErrNotFound, id)
	}
	return &value{Record: store.Record{ID: d.ID, PreviousID: d.PreviousID, CreatedAt: d.CreatedAt, Data: d.Data, Revision: uint64(d.Revision)}, MongoExpires: d.ExpiresAt}, nil
}

// op is one stream entry to apply.
type op struct {
	id     string
	delete bool
	// swap: v replaces an older version (a put keeps the first).
	swap bool
	v    *value
	// seq is the stream entry's place (entrySeq).
	seq int64
}

// apply writes a batch in one unordered bulk write: a put is an insert,
// a deletion replaces the document with a tombstone. A put whose id is
// there already (the same entry synced before a crash, or a tombstone)
// gets a duplicate-key error, the expected answer: a stored response
// never changes (the Responses API has no update), so tier 2 keeps the
// first copy and a late put cannot bring a deleted response back.
// Applying a batch twice gives the same documents. (Inserts also keep
// FerretDB on its _id index: a filtered upsert scans the collection.)
// A swap (a record that does change: a conversation) replaces a version
// older than itself, or inserts; a newer version or a tombstone makes it
// a duplicate-key error, as a late put is.
func (m *mongoTier) apply(ctx context.Context, ops []op, now time.Time, ttl time.Duration) error {
	if len(ops) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, 0, len(ops))
	for _, o := range ops {
		if o.delete {
			models = append(models, mongo.NewReplaceOneModel().
				SetFilter(bson.D{{Key: "_id", Value: o.id}}).
				SetReplacement(document{ID: o.id, Deleted: true, ExpiresAt: now.Add(ttl)}).
				SetUpsert(true))
			continue
		}
		d := document{ID: o.v.ID, PreviousID: o.v.PreviousID, CreatedAt: o.v.CreatedAt, ExpiresAt: o.v.MongoExpires, Data: o.v.Data,
			Revision: int64(o.v.Revision), SyncSeq: o.seq}
		if o.swap {
			models = append(models, mongo.NewReplaceOneModel().
				SetFilter(bson.D{{Key: "_id", Value: o.id}, {Key: "sync_seq", Value: bson.D{{Key: "$lt", Value: o.seq}}}}).
				SetReplacement(d).SetUpsert(true))
			continue
		}
		models = append(models, mongo.NewInsertOneModel().SetDocument(d))
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout+time.Duration(len(ops))*time.Millisecond)
	defer cancel()
	_, err := m.coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0 {
		for _, we := range bwe.WriteErrors {
			if we.Code != 11000 {
				return fmt.Errorf("mongodb bulk write: %w", err)
			}
		}
		return nil // only puts that met a tombstone
	}
	if err != nil {
		return fmt.Errorf("mongodb bulk write: %w", err)
	}
	return nil
}

// count is how many live and deleted documents the collection holds.
func (m *mongoTier) count(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*m.timeout)
	defer cancel()
	return m.coll.CountDocuments(ctx, bson.D{})
}

func (m *mongoTier) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return m.client.Disconnect(ctx)
}
