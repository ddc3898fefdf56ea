// A net/http server for tests/realservers: GET /bytes/N answers N bytes of the refserver pattern (byte i
// is 'a' + i % 26), so build/loadgen --verify checks it like the other HTTP servers. Standard library
// only: it builds offline. Usage: gobytes PORT (GOMAXPROCS from the environment, as Go reads it).
package main

import (
	"net/http"
	"os"
	"strconv"
	"strings"
)

const alphabet = "abcdefghijklmnopqrstuvwxyz"

func body(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[i%26]
	}
	return b
}

func main() {
	cache := map[int][]byte{}
	for _, n := range []int{100, 102400} {
		cache[n] = body(n)
	}
	http.HandleFunc("/bytes/", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/bytes/"))
		if err != nil || n < 0 || n > 1<<24 {
			http.NotFound(w, r)
			return
		}
		data, ok := cache[n]
		if !ok {
			data = body(n)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], nil); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
