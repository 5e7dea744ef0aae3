// Package emulatorkit is what the cloud API emulators (awsapi, gcpapi,
// azureapi) share and is not about their cloud: counting the calls each
// method receives, injecting faults into them (throttling, queued errors),
// and the loop that steps an emulator's world on its clock. What a throttled
// or failed call answers on the wire stays with each emulator. The metadata
// emulators (awsimds, gcpmetadata, azureimds) share one knob from it: the
// Refusal of every read.
package emulatorkit
