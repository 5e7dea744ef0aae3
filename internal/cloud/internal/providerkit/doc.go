// Package providerkit is what the node-group providers (aws, gcp, azure,
// clusterapi) share and is not about their cloud: the checks of a size
// change against a group's bounds, with the seam's errors and the same
// words in every provider, and the Node objects a provider reads and deletes
// beside the instances.
package providerkit
