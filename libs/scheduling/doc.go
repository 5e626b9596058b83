// Package scheduling is Hermod's endpoint-picking framework: the
// EndpointPickerConfig loader (ParseConfig), the plugin registry (Register),
// the extension-point interfaces plugins implement, and the Scheduler that
// runs one scheduling cycle per request.
//
// A cycle runs the prepare-data plugins, then lets the profile handler run
// scheduling profiles (filters in order, then scorers, then the picker),
// then the pre-request hooks. An endpoint's total in a profile is the sum
// over the profile's scorers of weight x clamp(score, 0, 1). Plugins live in
// libs/plugins; binaries import libs/plugins/standard to register them.
package scheduling
