// Package plugins is the root of Hermod's scheduling plugins; standard
// registers them all. One rule places a plugin:
//
//   - a plugin with state of its own (a projection of the decision and
//     completion streams, a model, a cache) or a dependency of its own (a
//     client of another service) has its own package, named after it:
//     activerequest, prefix, nohitlru, contextlength, preciseprefix,
//     predictedlatency, leastrequest, tokenize, responsestore, datalayer;
//   - the stateless rest live in the package of their extension point:
//     filter, scorer, picker, decider, headers, profilehandler.
//
// flight is not a plugin: it is the in-flight tracker the stateful
// scorers share.
package plugins
