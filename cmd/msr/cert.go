package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/cli"
)

var certCommand = command{
	summary: "a deployment's management API credentials: a TLS certificate and the read and admin tokens",
	usage: `  msr cert --out DIR --hosts ADDR[,ADDR...]
      write DIR/ca.crt and DIR/ca.key (the deployment's CA, which clients
      trust with --ca; keep ca.key offline once done), DIR/api.crt and
      DIR/api.key (a certificate the CA signs for every management address,
      which cannot sign), DIR/read.token and DIR/admin.token; files already
      there are kept. Every element's api_security: names them
      (docs/operations.md).
`,
	run: runCert,
}

func runCert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	out := fs.String("out", "", "the directory to write the credentials into")
	hosts := fs.String("hosts", "", "the elements' management addresses (and names), comma-separated")
	pos, _, err := cli.Parse(fs, args)
	if err != nil {
		return err
	}
	if *out == "" || *hosts == "" || len(pos) > 0 {
		return cli.Usagef("msr cert --out DIR --hosts ADDR[,ADDR...]")
	}
	if err := api.MakeCredentials(*out, strings.Split(*hosts, ",")); err != nil {
		return err
	}
	for _, f := range []string{"ca.crt", "ca.key", "api.crt", "api.key", "read.token", "admin.token"} {
		fmt.Println(filepath.Join(*out, f))
	}
	return nil
}
