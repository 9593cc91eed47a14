package bench

import (
	"fmt"
	"github.com/strata-storage/strata/internal/chart"
	"math"
	"strconv"
	"strings"
)

func sizeStr(n int64) string { return chart.SizeStr(n) }

// ParseSize reads 4096, 4k, 4KiB, 1m, 2G … (binary multiples).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult, t = 1<<10, t[:n-1]
		case 'm':
			mult, t = 1<<20, t[:n-1]
		case 'g':
			mult, t = 1<<30, t[:n-1]
		case 't':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional k, m, g or t", s)
	}
	if v > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return v * mult, nil
}
