// Package disttest is DIST for tests in a lab: sockets opened in a lab
// host's namespace, router hellos sent on them, and what a receiver holds
// read out as an agent's receive loop reads it.
package disttest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/netns"
)

// Listen opens a DIST socket on ifname in the namespace ns (a lab
// host's, lab.Namespace), closed when the test ends.
func Listen(t testing.TB, ns, ifname string, keys dist.Keyring) *dist.Conn {
	t.Helper()
	var c *dist.Conn
	if err := netns.Do(ns, func() (err error) {
		c, err = dist.Listen(ifname, keys)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RouterHellos returns what sends one hello of a back-end named name, as
// sender id, from c: 100 ms intervals, a hold of 3.
func RouterHellos(t testing.TB, c *dist.Conn, id uint64, key dist.Key, name string) (send func()) {
	sender, err := dist.NewSender(id, key)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		f, err := sender.Seal(dist.GroupMAC, c.MAC(), &dist.Hello{Role: dist.RoleRouter, HelloIntervalMs: 100, HoldMultiplier: 3, Name: name})
		if err == nil {
			err = c.Send(f)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Drain hands handle every frame c holds, as an agent's receive loop
// does, until a wait of 50 ms finds none.
func Drain(t testing.TB, c *dist.Conn, handle func(*dist.Frame)) {
	t.Helper()
	for {
		f, err := c.Recv(50 * time.Millisecond)
		if err == dist.ErrTimeout {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		handle(f)
	}
}

// Keys writes a deployment's DIST keys into dir, as an element's config
// names them by default: the element key secretHex (the file "key") and a
// fresh VCP key pair (vcp.key, vcp.pub). It returns the two keys and the
// keyring that accepts both.
func Keys(t testing.TB, dir, secretHex string) (element, vcp dist.Key, ring dist.Keyring) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, dist.ElementKeyFile), []byte(secretHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := dist.MakeKeys(dir, 1, dist.DefaultVCPKeyID); err != nil {
		t.Fatal(err)
	}
	element, err := dist.ReadKeyFile(filepath.Join(dir, dist.ElementKeyFile), 1)
	if err != nil {
		t.Fatal(err)
	}
	vcps, err := dist.ReadVCPKeys(filepath.Join(dir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil {
		t.Fatal(err)
	}
	return element, vcps[0], dist.Ring(element, vcps[0])
}
