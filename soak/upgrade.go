package soak

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/msr-router/msr/bench"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/vcp/vcpapi"
)

// upgradeInPlace is upgrade: an LB's or a back-end's agent upgraded in
// place to the build it runs, through the active VCP's relay (what `msr
// ctl upgrade` does to each element): the agent stops as on SIGTERM and
// execs the binary again, which adopts the pinned data path and its
// maps. The data path forwards throughout: the goal is nothing lost. A
// back-end's agent starts a new RIB feed.
type upgradeInPlace struct {
	quiet
	host    string
	backend bool
}

// upgradeBack is how long an upgraded agent has to answer again.
const upgradeBack = 20 * time.Second

func (u *upgradeInPlace) kind() string   { return "upgrade" }
func (u *upgradeInPlace) target() string { return u.host }
func (u *upgradeInPlace) restarts() restart {
	if u.backend {
		return restartsFeed
	}
	return restartsNothing
}

func (u *upgradeInPlace) inject(*bench.RouterLab) error {
	var before api.UpgradeStatus
	if err := onActive(func(c *vcpapi.Client) error { return u.call(c, "GET", "", &before) }); err != nil {
		return err
	}
	q := url.Values{"binary": {before.Binary}}
	if err := onActive(func(c *vcpapi.Client) error { return u.call(c, "POST", "?"+q.Encode(), nil) }); err != nil {
		return err
	}
	for deadline := time.Now().Add(upgradeBack); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var now api.UpgradeStatus
		if onActive(func(c *vcpapi.Client) error { return u.call(c, "GET", "", &now) }) == nil && now.Started.After(before.Started) {
			return nil
		}
	}
	return fmt.Errorf("%s: not back within %v of its upgrade in place", u.host, upgradeBack)
}

// call calls the upgrade on u's agent through c's relay, its answer
// into out.
func (u *upgradeInPlace) call(c *vcpapi.Client, method, query string, out *api.UpgradeStatus) error {
	status, body, err := c.Relay(u.host, method, api.PathUpgrade+query, nil)
	switch {
	case err != nil:
		return err
	case status != http.StatusOK:
		return fmt.Errorf("%s %s on %s: %d %s", method, api.PathUpgrade, u.host, status, body)
	case out != nil:
		return json.Unmarshal(body, out)
	}
	return nil
}
