package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/s3"
	"github.com/strata-storage/strata/internal/server"
)

func (e *env) s3Cmd() *cobra.Command {
	var cfg s3.Config
	var listen string
	var classes []string
	cmd := &cobra.Command{
		Use:   "s3 [--listen ADDR] [--root /s3]",
		Short: "Serve S3 for a Strata core until interrupted; s3 keys manages access keys",
		Long: `Serve the S3 API (Signature V4, multipart uploads, Glacier-style restore
of files on tape) in front of a Strata core. Buckets are the directories
under --root; keys with '/' are paths below them. Every request is signed
with an access key of a Strata user (strata s3 keys create) and gets that
user's permissions.

The gateway acts for its callers, so it must reach the core as an
administrator: run it as the server's user (or root) on the core's host,
or with an admin token. strata serve runs the same gateway itself when
its configuration has [s3] listen. See docs/S3.md.`,
		Args: exactArgs(0, "s3 [--listen ADDR]"),
	}
	var insecure bool
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7480", "address to serve S3 on (plain HTTP: off this host, put a TLS proxy in front, or use [s3] listen in strata serve)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "serve plain HTTP on an address other than loopback")
	cmd.Flags().StringVar(&cfg.Root, "root", "/s3", "directory whose subdirectories are the buckets")
	cmd.Flags().StringVar(&cfg.Region, "region", "us-east-1", "region reported to clients")
	cmd.Flags().DurationVar(&cfg.KeepAlive, "keep-alive", 10*time.Second, "how long a multipart Complete or a copy runs before its 200 is sent and spaces keep the connection alive")
	cmd.Flags().StringSliceVar(&classes, "storage-class", nil, "map a storage class to a class of service, CLASS=COS (repeatable; default STANDARD=, GLACIER=archive, DEEP_ARCHIVE=archive)")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, _ []string) error {
		if !server.Loopback(listen) && !insecure {
			return fmt.Errorf("refusing to serve S3 in plain HTTP on %s, which is not a loopback address: data would cross the network in the clear (serve it from strata serve with [s3] listen and TLS, put a TLS proxy in front, or pass --insecure)", listen)
		}
		if len(classes) > 0 {
			cfg.Classes = map[string]string{}
			for _, kv := range classes {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--storage-class %q: want CLASS=COS", kv)
				}
				cfg.Classes[strings.ToUpper(k)] = v
			}
		}
		cfg.Log = e.logger(false)
		g := s3.New(c, cfg)
		if err := g.Init(ctx); err != nil {
			return err
		}
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "s3: serving on http://%s, buckets under %s\n", l.Addr(), cfg.Root)
		srv := s3.NewServer(g, cfg.Log)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		select {
		case err = <-served:
			return err
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		}
	})
	cmd.AddCommand(e.s3KeysCmd())
	return cmd
}

func (e *env) s3KeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "S3 access keys of Strata users (admins only)"}
	var id idFlags
	var asJSON bool
	create := &cobra.Command{
		Use:   "create --user NAME [--json]",
		Short: "Create an access key; its secret is printed once",
		Args:  exactArgs(0, "s3 keys create --user NAME [--json]"),
	}
	id.add(create)
	create.Flags().BoolVar(&asJSON, "json", false, "print the key as a JSON object")
	create.RunE = e.withClient(func(ctx context.Context, c *client.Client, _ []string) error {
		r, err := id.request("s3 keys create")
		if err != nil {
			return err
		}
		r.Kind = "s3"
		k, err := c.CreateToken(ctx, r)
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(e.stdout).Encode(map[string]any{"access_key_id": k.ID, "secret_access_key": k.Token, "user": k.User, "uid": k.UID})
		}
		fmt.Fprintf(e.stdout, "access key id:     %s\nsecret access key: %s\n", k.ID, k.Token)
		fmt.Fprintf(e.stderr, "key %s for %s (uid %d); the secret is shown only now\n", k.ID, k.User, k.UID)
		return nil
	})
	list := &cobra.Command{Use: "list", Short: "List access keys (never their secrets)", Args: exactArgs(0, "s3 keys list")}
	list.RunE = e.withClient(func(ctx context.Context, c *client.Client, _ []string) error {
		ts, err := c.Tokens(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(w, "ACCESS KEY\tUSER\tUID\tCREATED\tSTATE")
		for _, t := range ts {
			if t.Kind != "s3" {
				continue
			}
			state := "valid"
			if t.Revoked != nil {
				state = "revoked"
			}
			fmt.Fprintf(w, "%s\t%q\t%d\t%s\t%s\n", t.ID, t.User, t.UID, t.Created.Format(time.RFC3339), state)
		}
		return w.Flush()
	})
	cmd.AddCommand(create, list, e.revokeCmd("Revoke access keys (gateways stop taking them within 30 s)", "s3 keys revoke ID..."))
	return cmd
}
