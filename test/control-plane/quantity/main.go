// Command quantity answers, for the differential test of src/util/quantity.ts, what upstream's
// k8s.io/apimachinery/pkg/api/resource (at the pinned release) makes of quantity strings.
//
// It reads one JSON array of strings per line on stdin and writes one JSON object per line on
// stdout: for each string whether ParseQuantity accepts it and its String(), and the Cmp of every
// pair of accepted ones (null where either side was refused).
//
//	go build -o quantity ./quantity && echo '["1Gi","1e3","x"]' | ./quantity
package main

import (
	"bufio"
	"encoding/json"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

type answer struct {
	OK     []bool   `json:"ok"`
	String []string `json:"string"`
	Cmp    [][]*int `json:"cmp"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<28)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var texts []string
		if err := json.Unmarshal(in.Bytes(), &texts); err != nil {
			panic(err)
		}
		quantities := make([]*resource.Quantity, len(texts))
		a := answer{OK: make([]bool, len(texts)), String: make([]string, len(texts)), Cmp: make([][]*int, len(texts))}
		for i, text := range texts {
			if q, err := resource.ParseQuantity(text); err == nil {
				quantities[i] = &q
				a.OK[i] = true
				a.String[i] = q.String()
			}
		}
		for i, x := range quantities {
			a.Cmp[i] = make([]*int, len(texts))
			for j, y := range quantities {
				if x != nil && y != nil {
					c := x.Cmp(*y)
					a.Cmp[i][j] = &c
				}
			}
		}
		if err := out.Encode(a); err != nil {
			panic(err)
		}
	}
	if err := in.Err(); err != nil {
		panic(err)
	}
}
