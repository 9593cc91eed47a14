package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/audit"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/pki"
)

// parseTTL reads a lifetime: a Go duration, or whole days ("30d").
func parseTTL(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad lifetime %q (e.g. 30d, 12h)", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad lifetime %q (e.g. 30d, 12h)", s)
	}
	return d, nil
}

// idFlags are the flags that say whom a credential stands for.
type idFlags struct {
	user, groups string
	uid, gid     int64
}

func (f *idFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.user, "user", "", "the user it stands for (looked up on the server's host unless --uid is given)")
	cmd.Flags().Int64Var(&f.uid, "uid", -1, "uid to act as (for a user the server's host does not know)")
	cmd.Flags().Int64Var(&f.gid, "gid", -1, "primary gid (default: the user's, or the uid)")
	cmd.Flags().StringVar(&f.groups, "groups", "", "supplementary gids, comma-separated (default: the user's on the server's host)")
}

// request is the token request the flags describe.
func (f *idFlags) request(op string) (client.TokenRequest, error) {
	r := client.TokenRequest{User: f.user}
	if f.user == "" {
		return r, fmt.Errorf("%s: --user is required", op)
	}
	for _, v := range []struct {
		n   int64
		dst **uint32
		f   string
	}{{f.uid, &r.UID, "--uid"}, {f.gid, &r.GID, "--gid"}} {
		if v.n < -1 || v.n > 1<<32-1 {
			return r, fmt.Errorf("%s: %s %d is not a valid id", op, v.f, v.n)
		}
		if v.n >= 0 {
			n := uint32(v.n)
			*v.dst = &n
		}
	}
	for _, g := range strings.Split(f.groups, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return r, fmt.Errorf("%s: --groups: %q is not a gid", op, g)
		}
		r.Groups = append(r.Groups, uint32(n))
	}
	return r, nil
}

func (e *env) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Bearer tokens for clients over TCP (admins only)"}
	var ttl string
	var id idFlags
	var scopes []string
	create := &cobra.Command{
		Use:   "create --user NAME [--ttl 30d] [--scope storage.read:/path]...",
		Short: "Issue a token; it is printed once and only its hash is kept",
		Args:  exactArgs(0, "token create --user NAME [--ttl 30d] [--scope storage.OP:/path]..."),
	}
	id.add(create)
	create.Flags().StringVar(&ttl, "ttl", "30d", "lifetime (30d, 12h; 0: never expires)")
	create.Flags().StringArrayVar(&scopes, "scope", nil, "limit the token to an operation under a path: storage.{read,create,modify,stage}:/path (repeatable)")
	create.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		r, err := id.request("token create")
		if err != nil {
			return err
		}
		d, err := parseTTL(ttl)
		if err != nil {
			return fmt.Errorf("token create: %w", err)
		}
		r.TTL, r.Scopes = d.Seconds(), scopes
		t, err := c.CreateToken(ctx, r)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, t.Token)
		exp := "never"
		if t.Expires != nil {
			exp = t.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(e.stderr, "token %s for %s (uid %d) expires %s; it is shown only now\n", t.ID, t.User, t.UID, exp)
		return nil
	})
	list := &cobra.Command{Use: "list", Short: "List tokens (never their secrets)", Args: exactArgs(0, "token list")}
	list.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		ts, err := c.Tokens(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tUSER\tUID\tCREATED\tEXPIRES\tSTATE\tSCOPES")
		now := time.Now()
		for _, t := range ts {
			if t.Kind != "" {
				continue // an S3 key: strata s3 keys list
			}
			exp, state := "never", "valid"
			if t.Expires != nil {
				exp = t.Expires.Format(time.RFC3339)
				if t.Expires.Before(now) {
					state = "expired"
				}
			}
			if t.Revoked != nil {
				state = "revoked"
			}
			fmt.Fprintf(w, "%s\t%q\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.User, t.UID, t.Created.Format(time.RFC3339), exp, state, strings.Join(t.Scopes, " "))
		}
		return w.Flush()
	})
	cmd.AddCommand(create, list, e.revokeCmd("Revoke tokens at once", "token revoke ID..."))
	return cmd
}

// revokeCmd revokes credentials (bearer tokens, S3 keys) by ID.
func (e *env) revokeCmd(short, usage string) *cobra.Command {
	revoke := &cobra.Command{Use: "revoke ID...", Short: short, Args: minArgs(1, usage)}
	revoke.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		for _, id := range args {
			if err := c.RevokeToken(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	return revoke
}

func (e *env) loginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login [TOKEN]",
		Short: "Store a bearer token for this user (read from stdin when not given), after checking it with the server",
		Args:  rangeArgs(0, 1, "login [TOKEN]"),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		tok := ""
		if len(args) == 1 {
			tok = args[0]
		} else {
			line, err := bufio.NewReader(e.stdin).ReadString('\n')
			if err != nil && line == "" {
				return errors.New("login: no token given (pass it, or pipe it on stdin)")
			}
			tok = line
		}
		tok = strings.TrimSpace(tok)
		c, err := e.client()
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetToken(tok)
		c.TCPOnly(true) // check the token itself, not the socket's identity
		who, err := c.WhoAmI(cmd.Context())
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		p, err := client.TokenFile()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		tmp := p + ".new"
		if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		fmt.Fprintf(e.stdout, "logged in to %s as %s (uid %d); token saved in %s\n", c.Server(), who.User, who.UID, p)
		return nil
	}
	return cmd
}

func (e *env) whoamiCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "whoami", Short: "Show who the server takes you to be", Args: exactArgs(0, "whoami")}
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		w, err := c.WhoAmI(ctx)
		if err != nil {
			return err
		}
		var groups []string
		for _, g := range w.Groups {
			groups = append(groups, strconv.FormatUint(uint64(g), 10))
		}
		fmt.Fprintf(e.stdout, "%s uid=%d gid=%d groups=%s via %s", w.User, w.UID, w.GID, strings.Join(groups, ","), w.Method)
		if w.Token != "" {
			fmt.Fprintf(e.stdout, " (token %s)", w.Token)
		}
		if w.Admin {
			fmt.Fprint(e.stdout, " admin")
		}
		if len(w.Scopes) > 0 {
			fmt.Fprintf(e.stdout, " scopes=%s", strings.Join(w.Scopes, ","))
		}
		fmt.Fprintln(e.stdout)
		return nil
	})
	return cmd
}

func (e *env) chownCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chown UID[:GID] PATH...",
		Short: "Change owner and group (numeric ids; admins only, or an owner changing the group to one of its own)",
		Args:  minArgs(2, "chown UID[:GID] PATH..."),
	}
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		u, g, hasG := strings.Cut(args[0], ":")
		var r client.SetAttr
		parse := func(s, what string) (*uint32, error) {
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("chown: %s %q is not a number", what, s)
			}
			v := uint32(n)
			return &v, nil
		}
		var err error
		if u != "" {
			if r.UID, err = parse(u, "uid"); err != nil {
				return err
			}
		}
		if hasG && g != "" {
			if r.GID, err = parse(g, "gid"); err != nil {
				return err
			}
		}
		if r.UID == nil && r.GID == nil {
			//lint:ignore ST1005 "PATH..." is the usage line's syntax
			return errors.New("usage: strata chown UID[:GID] PATH...")
		}
		return eachRemote(args[1:], func(p string) error {
			r.Path = p
			_, err := c.SetAttr(ctx, r)
			return err
		})
	})
	return cmd
}

func (e *env) certCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Certificates from the server's own CA (run on the core's host, as its user)"}
	var cfgPath, dataDir, out, user string
	var hosts []string
	issue := &cobra.Command{
		Use:   "issue (--host NAME... | --user NAME) --out DIR",
		Short: "Issue a mover's server certificate (--host) or a user's client certificate for mutual TLS (--user)",
		Args:  exactArgs(0, "cert issue (--host NAME... | --user NAME) --out DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" || (len(hosts) == 0) == (user == "") {
				return errors.New("usage: strata cert issue (--host NAME... | --user NAME) --out DIR")
			}
			cfg, err := loadConfig(cfgPath, func(c *config.Config) {
				if dataDir != "" {
					c.DataDir = dataDir
				}
			})
			if err != nil {
				return err
			}
			f := pki.In(filepath.Join(cfg.DataDir, "tls"))
			if err := os.MkdirAll(out, 0o700); err != nil {
				return fmt.Errorf("cert issue: %w", err)
			}
			cert, key := filepath.Join(out, "cert.pem"), filepath.Join(out, "key.pem")
			if user != "" {
				err = pki.Issue(f, cert, key, nil, user, false)
			} else {
				err = pki.Issue(f, cert, key, hosts, hosts[0], true)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n%s\n", cert, key)
			return nil
		},
	}
	issue.Flags().StringVar(&cfgPath, "config", "", "the server's TOML configuration (default ./strata.toml if present)")
	issue.Flags().StringVar(&dataDir, "data", "", "the server's data directory (overrides data_dir)")
	issue.Flags().StringVar(&out, "out", "", "directory to write cert.pem and key.pem to")
	issue.Flags().StringArrayVar(&hosts, "host", nil, "a name or address the mover is reached by (repeatable)")
	issue.Flags().StringVar(&user, "user", "", "the user a client certificate stands for (its common name)")
	cmd.AddCommand(issue)
	return cmd
}

func (e *env) auditCmd() *cobra.Command {
	var cfgPath, dataDir, user, since string
	var denied, asJSON bool
	cmd := &cobra.Command{
		Use:   "audit [--user NAME] [--since 1h] [--denied] [--json]",
		Short: "Read the audit log (on the server's host, as its user or root)",
		Args:  exactArgs(0, "audit [--user NAME] [--since 1h] [--denied] [--json]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cfgPath, func(c *config.Config) {
				if dataDir != "" {
					c.DataDir = dataDir
					c.Audit.Path = ""
				}
			})
			if err != nil {
				return err
			}
			if err := cfg.Complete(); err != nil {
				return err
			}
			if cfg.Audit.Path == "" {
				return errors.New("audit: the audit log is off ([audit] path = \"off\")")
			}
			f := audit.Filter{User: user, Denied: denied}
			if since != "" {
				if t, err := time.Parse(time.RFC3339, since); err == nil {
					f.Since = t
				} else if d, err := parseTTL(since); err == nil {
					f.Since = time.Now().Add(-d)
				} else {
					return fmt.Errorf("audit: --since %q: want a duration (1h, 2d) or an RFC 3339 time", since)
				}
			}
			w := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
			if !asJSON {
				fmt.Fprintln(w, "TIME\tUSER\tAUTH\tREMOTE\tOP\tPATHS\tSTATUS\tERROR")
			}
			err = audit.Read(cfg.Audit.Path, f, func(r audit.Record, line []byte) error {
				if asJSON {
					_, err := e.stdout.Write(line)
					return err
				}
				who := r.User
				if who == "" {
					who = "-"
				}
				paths := make([]string, len(r.Paths))
				for i, p := range r.Paths {
					paths[i] = strconv.Quote(p)
				}
				_, err := fmt.Fprintf(w, "%s\t%q\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Time.Local().Format(time.DateTime), who, r.Auth, r.Remote, r.Op, strings.Join(paths, " "), r.Status, r.Error)
				return err
			})
			if err != nil {
				return err
			}
			if !asJSON {
				return w.Flush()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the server's TOML configuration (default ./strata.toml if present)")
	cmd.Flags().StringVar(&dataDir, "data", "", "the server's data directory (its audit.log)")
	cmd.Flags().StringVar(&user, "user", "", "only this user's requests")
	cmd.Flags().StringVar(&since, "since", "", "only requests since this long ago (1h, 2d) or this time (RFC 3339)")
	cmd.Flags().BoolVar(&denied, "denied", false, "only refused requests (401, 403)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the log's JSON lines")
	return cmd
}

// quotaTable prints usage against limits, one row per user or group.
func quotaTable(w io.Writer, qs []client.QuotaInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUOTA\tNAME\tFILES\tLIMIT\tBYTES\tLIMIT\tON DISK\tLIMIT\tIN PROGRESS\t")
	limit := func(n int64, bytes bool) string {
		switch {
		case n == 0:
			return "-"
		case bytes:
			return human(n)
		}
		return strconv.FormatInt(n, 10)
	}
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", q.Kind, shown(q.Name), q.Files, limit(q.MaxFiles, false), human(q.Bytes), limit(q.MaxBytes, true),
			human(q.DiskBytes), limit(q.MaxDiskBytes, true), human(q.PendingBytes))
	}
	return tw.Flush()
}

func (e *env) quotaCmd() *cobra.Command {
	var user string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "quota [--user NAME]",
		Short: "Your usage and limits (yours and your groups'; another user's for admins)",
		Args:  exactArgs(0, "quota [--user NAME] | quota set (--user NAME | --group NAME) [--bytes SIZE] [--files N] [--disk-bytes SIZE]"),
	}
	cmd.Flags().StringVar(&user, "user", "", "another user (admins)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	cmd.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		qs, err := c.Quota(ctx, user)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(e.stdout, qs)
		}
		return quotaTable(e.stdout, qs)
	})
	var setUser, setGroup, bytes, diskBytes string
	var files int64
	set := &cobra.Command{
		Use:   "set (--user NAME | --group NAME) [--bytes SIZE] [--files N] [--disk-bytes SIZE]",
		Short: "Set a user's or group's limits (admins; 0 or none: no limit, all none: remove)",
		Args:  exactArgs(0, "quota set (--user NAME | --group NAME) [--bytes SIZE] [--files N] [--disk-bytes SIZE]"),
	}
	set.Flags().StringVar(&setUser, "user", "", "the user (name or uid)")
	set.Flags().StringVar(&setGroup, "group", "", "the group (name or gid)")
	set.Flags().StringVar(&bytes, "bytes", "", "bytes in all its files (e.g. 10TiB)")
	set.Flags().Int64Var(&files, "files", 0, "files")
	set.Flags().StringVar(&diskBytes, "disk-bytes", "", "bytes of its files on the disk tier")
	set.RunE = e.withClient(func(ctx context.Context, c *client.Client, args []string) error {
		r := client.QuotaSet{Kind: "user", Name: setUser, Files: files}
		if (setUser == "") == (setGroup == "") {
			return errors.New("quota set: name one of --user and --group")
		}
		if setGroup != "" {
			r.Kind, r.Name = "group", setGroup
		}
		for _, v := range []struct {
			s   string
			dst *int64
			f   string
		}{{bytes, &r.Bytes, "--bytes"}, {diskBytes, &r.DiskBytes, "--disk-bytes"}} {
			if v.s == "" {
				continue
			}
			n, err := config.ParseSize(v.s)
			if err != nil {
				return fmt.Errorf("quota set: %s: %w", v.f, err)
			}
			*v.dst = n
		}
		q, err := c.SetQuota(ctx, r)
		if err != nil {
			return err
		}
		return quotaTable(e.stdout, []client.QuotaInfo{*q})
	})
	cmd.AddCommand(set)
	return cmd
}
