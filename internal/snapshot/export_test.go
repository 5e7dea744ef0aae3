package snapshot

// LoadReference is loadReference, for the tests of package snapshot_test.
var LoadReference = loadReference
