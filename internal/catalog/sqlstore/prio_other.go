//go:build !linux

package sqlstore

import "errors"

type booster struct{}

func newBooster() (*booster, error) {
	return &booster{}, errors.New("catalog: writer priority: only on Linux")
}
func (*booster) set(bool) {}
