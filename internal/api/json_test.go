package api

import (
	"bytes"
	stdjson "encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// apiTypes is every body that crosses the control plane.
func apiTypes() []any {
	return []any{&Error{}, &Segment{}, &Layout{}, &FileInfo{}, &TapeCopy{}, &StageRequest{}, &StageStatus{},
		&StageResponse{}, &MigrateRequest{}, &PurgeRequest{}, &RepackRequest{}, &HSMResult{}, &Cartridge{},
		&Drive{}, &QueueEntry{}, &Library{}, &MkdirRequest{}, &CreateRequest{}, &StripeTarget{},
		&CreateResponse{}, &SegmentReceipt{}, &CommitRequest{}, &AbortRequest{}, &OpenResponse{}, &DamageReport{}, &DamageReply{}, &Integrity{}, &ScrubRequest{}, &ServiceChange{}, &LibraryFault{},
		&RenameRequest{}, &RemoveRequest{}, &SetAttrRequest{}, &DeviceInfo{}, &PoolInfo{}, &DFResponse{},
		&Local{}, &MoverRegistration{}, &MoverRegistered{}, &COS{},
		&Batch[CreateRequest]{}, &Batch[CommitRequest]{}, &BatchReply[CreateResponse]{}, &BatchReply[FileInfo]{}}
}

var strs = []string{"", "a", "/proj/cfd/run42.dat", "<script>&amp;</script>", "tab\tnew\nline\r\"q\"\\",
	"\x00\x01\x1f", "héllo wörld ☃ 𝄞", "\u2028\u2029", "bad \xff\xfe utf8", strings.Repeat("long", 100)}

// fill sets v (addressable) to a random value; zero values are likely, to
// exercise omitempty.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	if r.IntN(4) == 0 {
		v.SetZero()
		return
	}
	if v.Type() == reflect.TypeOf(time.Time{}) {
		t := time.Unix(r.Int64N(1<<33)-1<<32, r.Int64N(1e9))
		if r.IntN(2) == 0 {
			t = t.UTC()
		} else {
			t = t.In(time.FixedZone("X", 3600*r.IntN(24)-43200))
		}
		v.Set(reflect.ValueOf(t))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[r.IntN(len(strs))])
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		vals := []int64{1, -1, 42, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, r.Int64()}
		n := vals[r.IntN(len(vals))]
		if v.OverflowInt(n) {
			n = int64(int8(n))
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		vals := []uint64{1, 0o644, math.MaxUint32, math.MaxUint64, r.Uint64()}
		n := vals[r.IntN(len(vals))]
		if v.OverflowUint(n) {
			n = uint64(uint8(n))
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		vals := []float64{0.5, 1e21, 1e-7, 123456789.125, -3.75, math.MaxFloat64, math.SmallestNonzeroFloat64, r.Float64() * 1e6}
		v.SetFloat(vals[r.IntN(len(vals))])
	case reflect.Pointer:
		if depth > 3 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth > 3 {
			return
		}
		n := r.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range r.IntN(4) {
			k := reflect.New(v.Type().Key()).Elem()
			fill(r, k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	default:
		panic("fill: no rule for " + v.Type().String())
	}
}

// TestJSONMatchesStdlib: for random values of every API type, our codec
// writes the bytes encoding/json writes, through Marshal and through an
// Encoder, and reads them back to the value encoding/json reads.
func TestJSONMatchesStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, proto := range apiTypes() {
		typ := reflect.TypeOf(proto).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			for range 300 {
				v := reflect.New(typ)
				fill(r, v.Elem(), 0)
				want, werr := stdjson.Marshal(v.Interface())
				got, gerr := Marshal(v.Interface())
				if (werr != nil) != (gerr != nil) {
					t.Fatalf("Marshal error %v, encoding/json %v, on %+v", gerr, werr, v.Interface())
				}
				if werr != nil {
					continue
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("Marshal:\n got %s\nwant %s", got, want)
				}
				var wb, gb bytes.Buffer
				stdjson.NewEncoder(&wb).Encode(v.Interface())
				NewEncoder(&gb).Encode(v.Interface())
				if !bytes.Equal(gb.Bytes(), wb.Bytes()) {
					t.Fatalf("Encoder:\n got %s\nwant %s", gb.Bytes(), wb.Bytes())
				}
				wv, gv := reflect.New(typ), reflect.New(typ)
				if err := stdjson.Unmarshal(want, wv.Interface()); err != nil {
					t.Fatalf("encoding/json cannot read its own %s: %v", want, err)
				}
				dec := NewDecoder(bytes.NewReader(want))
				dec.DisallowUnknownFields()
				if err := dec.Decode(gv.Interface()); err != nil {
					t.Fatalf("Decode %s: %v", want, err)
				}
				if !equal(gv.Interface(), wv.Interface()) {
					t.Fatalf("Decode %s:\n got %+v\nwant %+v", want, gv.Elem().Interface(), wv.Elem().Interface())
				}
			}
		})
	}
	// What the core sends besides the API types.
	for _, v := range []any{struct{}{}, map[string]any{"version": Version, "epoch": int64(7)}, nil} {
		want, _ := stdjson.Marshal(v)
		if got, _ := Marshal(v); !bytes.Equal(got, want) {
			t.Errorf("Marshal(%v) = %s, want %s", v, got, want)
		}
	}
}

// equal compares decoded values, times by instant and zone offset (a
// decoded zone has no name).
func equal(a, b any) bool {
	ja, _ := stdjson.Marshal(a)
	jb, _ := stdjson.Marshal(b)
	return bytes.Equal(ja, jb) && reflect.DeepEqual(stripTimes(a), stripTimes(b))
}

func stripTimes(v any) any {
	s, _ := stdjson.Marshal(v)
	var m any
	stdjson.Unmarshal(s, &m)
	return m
}

// FuzzDecode: on any input, our decoder (with DisallowUnknownFields, as the
// core uses it) accepts what encoding/json accepts, and reads the same
// value.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"path":"/a","size":0,"uid":0,"gid":0}`,
		`{"path":"/a","size":1e3}`,
		`{"Path":"/a","SIZE":5}`,
		`{"path":"/a","unknown":1}`,
		`{"path":"/a","size":-1,"stripes":2,"overwrite":true,"mode":420}`,
		`{"bitfile":3,"stripes":[{"index":0,"length":5,"crc32c":7}],"fixity":"blake3:00"}`,
		`{"path":"\ud800"}`,
		`{"path":null,"size":null}`,
		`[1,2]`, `{"path":"/a"} {"path":"/b"}`, `{"mtime":"2026-11-21T19:31:47.09103028Z"}`,
	} {
		f.Add([]byte(s))
	}
	decoders := []any{&CreateRequest{}, &CommitRequest{}, &MkdirRequest{}, &SetAttrRequest{}, &CreateResponse{}, &FileInfo{}, &StageRequest{}, &MoverRegistration{},
		&Batch[CreateRequest]{}, &Batch[CommitRequest]{}, &BatchReply[FileInfo]{}}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, proto := range decoders {
			typ := reflect.TypeOf(proto).Elem()
			wv, gv := reflect.New(typ), reflect.New(typ)
			wd := stdjson.NewDecoder(bytes.NewReader(in))
			wd.DisallowUnknownFields()
			werr := wd.Decode(wv.Interface())
			gd := NewDecoder(bytes.NewReader(in))
			gd.DisallowUnknownFields()
			gerr := gd.Decode(gv.Interface())
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s on %q: error %v, encoding/json %v", typ.Name(), in, gerr, werr)
			}
			if werr == nil && !equal(gv.Interface(), wv.Interface()) {
				t.Fatalf("%s on %q:\n got %+v\nwant %+v", typ.Name(), in, gv.Elem().Interface(), wv.Elem().Interface())
			}
		}
	})
}
