package main

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/cli"
)

var keyCommand = command{
	summary: "a deployment's DIST keys: make them, and roll them over with no outage",
	usage: `  msr key --out DIR
      write DIR/key (the element key, for every host), DIR/vcp.key (the
      VCP's signing key, for the VCP hosts only), DIR/vcp.pub (its public
      half, for the LBs and back-ends) and DIR/rib.key (the RIB feed's
      password, for the VCPs and back-ends); files already there are kept.
  msr key rotate --dir DIR add|promote|retire
      one step of a rollover of the keys in DIR. After each, copy the files
      to the hosts and have every element read them (SIGHUP, or msr ctl
      reload on a VCP) before the next (docs/operations.md, "Rolling over
      DIST keys").
`,
	run: runKey,
}

func runKey(args []string) error {
	if len(args) > 0 && args[0] == "rotate" {
		fs := flag.NewFlagSet("key rotate", flag.ContinueOnError)
		dir := fs.String("dir", "", "the directory of the deployment's keys")
		pos, _, err := cli.Parse(fs, args[1:])
		if err != nil {
			return err
		}
		if *dir == "" || len(pos) != 1 {
			return cli.Usagef("msr key rotate --dir DIR add|promote|retire")
		}
		if err := dist.RotateKeys(*dir, pos[0]); err != nil {
			return err
		}
		return printKeys(*dir)
	}
	fs := flag.NewFlagSet("key", flag.ContinueOnError)
	out := fs.String("out", "", "the directory to write the keys into")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	if *out == "" || len(pos) > 0 {
		return cli.Usagef("msr key --out DIR, or msr key rotate --dir DIR add|promote|retire")
	}
	if err := dist.MakeKeys(*out, 1, dist.DefaultVCPKeyID); err != nil {
		return err
	}
	return printKeys(*out)
}

// printKeys prints each key file of dir with the ids it holds, the
// sealing one first.
func printKeys(dir string) error {
	elems, err := dist.ReadKeys(filepath.Join(dir, dist.ElementKeyFile), 1)
	if err != nil {
		return err
	}
	vcps, err := dist.ReadVCPKeys(filepath.Join(dir, dist.VCPKeyFile), dist.DefaultVCPKeyID)
	if err != nil {
		return err
	}
	ids := func(keys []dist.Key) (s string) {
		for i, k := range keys {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprint(k.ID)
		}
		return s
	}
	fmt.Printf("%s\telement key ids %s (the first seals)\n", filepath.Join(dir, dist.ElementKeyFile), ids(elems))
	fmt.Printf("%s\tVCP key ids %s (the first signs): the VCP hosts only\n", filepath.Join(dir, dist.VCPKeyFile), ids(vcps))
	fmt.Printf("%s\tthe VCP's public keys: the LBs and back-ends\n", filepath.Join(dir, dist.VCPPublicKeyFile))
	fmt.Printf("%s\tthe RIB feed's password: the VCPs and back-ends\n", filepath.Join(dir, dist.RIBKeyFile))
	return nil
}
