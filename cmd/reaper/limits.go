package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag value in bytes: a number with an optional unit K, M, G or T (powers of 1024;
// "Ki", "KiB" and "KB" mean the same, as in systemd's MemoryMax=). Zero means no limit.
type byteSize int64

func (b *byteSize) String() string {
	if b == nil || *b == 0 {
		return "0"
	}
	return byteText(int64(*b))
}

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseBytes parses "512M", "2G", "64Mi", "1073741824".
func parseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			shift = 10 * (i + 1)
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with K, M, G or T)", s)
	}
	v *= float64(int64(1) << shift)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

// cpus is the --cpu-max flag: CPUs as a decimal number (1.5 is one and a half CPUs' time per period).
type cpus float64

func (c *cpus) String() string {
	if c == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*c), 'g', -1, 64)
}

func (c *cpus) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v > 0 && v < 0.01 {
		return fmt.Errorf("%q is not a number of CPUs (0, or 0.01 and more; 1.5 means one and a half)", s)
	}
	*c = cpus(v)
	return nil
}

// byteText writes n bytes as --output-budget reads them.
func byteText(n int64) string {
	for i, unit := range []string{"G", "M", "K"} {
		if shift := 30 - 10*i; n != 0 && n%(1<<shift) == 0 {
			return strconv.FormatInt(n>>shift, 10) + unit
		}
	}
	return strconv.FormatInt(n, 10)
}
