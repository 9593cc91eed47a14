//go:build !linux

package sqlstore

import "errors"

func prioritize() error { return errors.New("catalog: writer priority: only on Linux") }
