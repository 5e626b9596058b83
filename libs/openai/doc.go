// Package openai is the OpenAI HTTP API as Hermod's two ways in (the
// gateway and the picker's Envoy ext_proc server) read and answer it:
//
//   - Parse reads a completions or chat-completions request body in one
//     pass, checking that it is one JSON object, into the Request the
//     scheduler consumes;
//   - Accountant follows a response as it passes (server-sent-event
//     framing, the usage object, the first token's time), and Observation
//     turns what it saw into a completion event;
//   - Error is OpenAI's error shape, and PickRejection maps a Pick error
//     onto the status and error a client gets.
package openai
