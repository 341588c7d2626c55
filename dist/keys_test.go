package dist

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyFiles: MakeKeys writes a deployment's keys once; an element key
// file takes several keys, the first sealing, and refuses what is not a
// key with its line; an element refuses the VCP's private key where it
// takes the public one.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	if err := MakeKeys(dir, 1, DefaultVCPKeyID); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(dir, VCPKeyFile))
	if err := MakeKeys(dir, 1, DefaultVCPKeyID); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, VCPKeyFile)); string(again) != string(first) {
		t.Error("MakeKeys replaced the VCP's key")
	}
	for _, f := range []string{ElementKeyFile, VCPKeyFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", f, fi.Mode(), err)
		}
	}
	priv, err := ReadVCPKeys(filepath.Join(dir, VCPKeyFile), 9)
	if err != nil || len(priv) != 1 || priv[0].ID != DefaultVCPKeyID || priv[0].Role() != RoleVCPKey {
		t.Fatalf("ReadVCPKeys: %+v, %v", priv, err)
	}
	pub, err := ReadVCPPublic(filepath.Join(dir, VCPPublicKeyFile), 9)
	if err != nil || !pub[DefaultVCPKeyID].Public.Equal(priv[0].Verifier().Public) {
		t.Fatalf("ReadVCPPublic: %+v, %v", pub, err)
	}
	if _, err := ReadVCPPublic(filepath.Join(dir, VCPKeyFile), 9); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Errorf("an element took the VCP's private key: %v", err)
	}

	path := filepath.Join(dir, "rolling")
	hexA, hexB := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	os.WriteFile(path, []byte("# rolling over\n3:"+hexB+"\n"+hexA+"   # the old one\n"), 0o600)
	keys, err := ReadKeys(path, 1)
	if err != nil || len(keys) != 2 || keys[0].ID != 3 || keys[1].ID != 1 || keys[0].Role() != RoleElementKey {
		t.Fatalf("ReadKeys: %+v, %v", keys, err)
	}
	for text, want := range map[string]string{
		"\n\n3:zz\n":                "rolling:3: DIST key is not hex",
		"0:" + hexA + "\n":          "rolling:1: key id",
		hexA + "\n1:" + hexB:        "rolling:2: key id 1 twice",
		"1:" + hexA[:20] + "\n":     "rolling:1: DIST key 1 is 10 bytes",
		"# nothing but a comment\n": "no DIST key",
	} {
		os.WriteFile(path, []byte(text), 0o600)
		if _, err := ReadKeys(path, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

// TestRotateKeys walks a rollover: at every step, a receiver that has
// read the files of the step before (or of this one) accepts what a
// sender of this step seals, hellos and configuring frames alike; at the
// end the old keys are gone.
func TestRotateKeys(t *testing.T) {
	dir := t.TempDir()
	if err := MakeKeys(dir, 1, DefaultVCPKeyID); err != nil {
		t.Fatal(err)
	}
	type view struct {
		elem, vcp Key
		ring      Keyring
	}
	read := func() view {
		elems, err := ReadKeys(filepath.Join(dir, ElementKeyFile), 1)
		if err != nil {
			t.Fatal(err)
		}
		privs, err := ReadVCPKeys(filepath.Join(dir, VCPKeyFile), DefaultVCPKeyID)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := ReadVCPPublic(filepath.Join(dir, VCPPublicKeyFile), DefaultVCPKeyID)
		if err != nil {
			t.Fatal(err)
		}
		ring := Ring(elems...)
		for id, v := range pub {
			ring[id] = v
		}
		return view{elems[0], privs[0], ring}
	}
	accepts := func(sender, receiver view, when string) {
		t.Helper()
		for _, c := range []struct {
			key Key
			msg Message
		}{{sender.elem, &Hello{Role: RoleRouter, Name: "r1"}}, {sender.vcp, &VCPAnnounce{State: VCPActive, APIAddr: netip.MustParseAddr("10.0.0.1")}}} {
			b, err := Marshal(&Frame{Dst: GroupMAC, Src: macR1, Msg: c.msg}, c.key)
			if err == nil {
				_, err = Unmarshal(b, receiver.ring)
			}
			if err != nil {
				t.Errorf("%s: %s sealed with key %d: %v", when, c.msg.Type(), c.key.ID, err)
			}
		}
	}
	old := read()
	if err := RotateKeys(dir, RotateRetire); err != nil {
		t.Fatal(err)
	}
	if err := RotateKeys(dir, RotatePromote); err == nil {
		t.Error("promoted with no new key")
	}
	prev := old
	for _, step := range []string{RotateAdd, RotatePromote, RotateRetire} {
		if err := RotateKeys(dir, step); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		now := read()
		accepts(now, prev, step+", a receiver not yet reloaded")
		accepts(prev, now, step+", a sender not yet reloaded")
		accepts(now, now, step)
		prev = now
	}
	if prev.elem.ID == old.elem.ID || prev.vcp.ID == old.vcp.ID || len(prev.ring) != 2 {
		t.Errorf("after the rollover: keys %d and %d, ring %v; the old were %d and %d", prev.elem.ID, prev.vcp.ID, prev.ring, old.elem.ID, old.vcp.ID)
	}
	b, _ := Marshal(&Frame{Dst: GroupMAC, Src: macR1, Msg: &VCPAnnounce{State: VCPActive, APIAddr: netip.MustParseAddr("10.0.0.1")}}, old.vcp)
	if _, err := Unmarshal(b, prev.ring); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the retired VCP key: %v, want unknown_key", err)
	}
	if err := RotateKeys(dir, "sideways"); err == nil {
		t.Error("took an unknown step")
	}
}
