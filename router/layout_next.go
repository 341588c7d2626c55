//go:build msr_next_layout

package router

// A test build (go build -tags msr_next_layout): the next map layout, its
// neighbour entries 8 bytes longer, as a build that added a field to them
// would have it. e2e's TestRollingUpgrade upgrades the default lab to it.
func init() { nextLayout = 1 }
