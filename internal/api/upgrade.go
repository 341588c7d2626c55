package api

import "time"

// PathUpgrade is the upgrade in place on every agent's API: GET says
// what runs and since when; POST ?binary=PATH[&force=1] has the agent
// exec that build with its own arguments (msr's upgrade command).
const PathUpgrade = "/upgrade"

// UpgradeStatus is what GET PathUpgrade answers, and POST's answer.
type UpgradeStatus struct {
	Running string    `json:"running"` // msr version's line
	Started time.Time `json:"started"`
	Binary  string    `json:"binary"`
	// To is the build the agent is about to exec (POST's answer).
	To string `json:"to,omitempty"`
}
