// Package bus is Hermod's NATS and JetStream layer: the subject names of the
// event-sourcing contract (ARCHITECTURE.md, "Event sourcing"), the streams
// and the metrics KV bucket that hold them (EnsureStreams), a connection with
// reconnect and logging (Connect), a non-blocking typed publisher
// (Publisher), typed stream consumers that replay and follow a stream
// (Consume), and typed core NATS publish/subscribe (PublishCore, Subscribe).
//
// Subjects:
//
//	hermod.kv.<pool>.<pod>              stream HERMOD_KV
//	hermod.metrics.<pool>.<endpoint>    core NATS + KV bucket HERMOD_METRICS
//	hermod.decisions.<pool>             stream HERMOD_DECISIONS
//	hermod.completions.<pool>           stream HERMOD_COMPLETIONS
//	hermod.scaling.<pool>               stream HERMOD_SCALING
//	hermod.config.<pool>                core NATS (ConfigStatus)
//
// Pool and endpoint names are escaped into subject tokens (EscapeToken), so
// names such as "10.0.0.5:8000" are safe and can be parsed back.
//
// Payloads are protobuf messages (hermod.events.v1). Events carry ids and
// are published with the Nats-Msg-Id header, so a republished event is
// dropped by the stream's duplicate window and replays are idempotent.
//
// Every call that does I/O takes a context; every goroutine the package
// starts belongs to a Publisher, a Consumer or a Subscription, whose Close
// stops it and waits for it.
package bus
