package core

import "testing"

func TestStripeLen(t *testing.T) {
	cases := []struct {
		size, unit int64
		w          int
		want       []int64
	}{
		{1, 4, 1, []int64{1}},
		{4, 4, 2, []int64{4, 0}},
		{5, 4, 2, []int64{4, 1}},
		{8, 4, 2, []int64{4, 4}},
		{9, 4, 2, []int64{5, 4}},
		{13, 4, 3, []int64{5, 4, 4}},
		{30, 4, 3, nil},
	}
	// The last case by hand: units (4 bytes) 0..6 are full (28 bytes), unit 7
	// holds 2. Stripe k gets units k, k+3, k+6: stripe 0 = 0,3,6 = 12; stripe 1
	// = 1,4,7 = 4+4+2 = 10; stripe 2 = 2,5 = 8.
	cases[len(cases)-1].want = []int64{12, 10, 8}
	for _, c := range cases {
		var sum int64
		for k := 0; k < c.w; k++ {
			got := stripeLen(c.size, c.unit, c.w, k)
			if got != c.want[k] {
				t.Errorf("stripeLen(%d, %d, %d, %d) = %d, want %d", c.size, c.unit, c.w, k, got, c.want[k])
			}
			sum += got
		}
		if sum != c.size {
			t.Errorf("size %d unit %d width %d: stripes hold %d bytes", c.size, c.unit, c.w, sum)
		}
	}
	// Exhaustively: lengths always add up.
	for size := int64(0); size < 200; size++ {
		for w := 1; w <= 5; w++ {
			var sum int64
			for k := 0; k < w; k++ {
				sum += stripeLen(size, 7, w, k)
			}
			if sum != size {
				t.Fatalf("size %d width %d: %d", size, w, sum)
			}
		}
	}
}
