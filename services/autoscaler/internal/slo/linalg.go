package slo

// Fixed-size matrix helpers for the tuner's three-state, two-observation
// filter. Arrays keep them allocation-free.

type (
	vec3 = [3]float64
	mat3 = [3][3]float64
	// mat23 is the 2x3 observation Jacobian H.
	mat23 = [2][3]float64
	// mat32 is the 3x2 Kalman gain.
	mat32 = [3][2]float64
	mat2  = [2][2]float64
)

// covObs returns H P H^T.
func covObs(h mat23, p mat3) mat2 {
	var out mat2
	for r := range 2 {
		for c := range 2 {
			var s float64
			for i := range 3 {
				for j := range 3 {
					s += h[r][i] * p[i][j] * h[c][j]
				}
			}
			out[r][c] = s
		}
	}
	return out
}

// inv2 inverts a 2x2 matrix; ok is false when it is singular.
func inv2(a mat2) (mat2, bool) {
	det := a[0][0]*a[1][1] - a[0][1]*a[1][0]
	if det == 0 || !finite(det) {
		return mat2{}, false
	}
	return mat2{
		{a[1][1] / det, -a[0][1] / det},
		{-a[1][0] / det, a[0][0] / det},
	}, true
}

// gain returns K = P H^T S^-1.
func gain(p mat3, h mat23, sInv mat2) mat32 {
	var k mat32
	for i := range 3 {
		pht := [2]float64{dot3(p[i], h[0]), dot3(p[i], h[1])} // row i of P H^T
		for c := range 2 {
			for d := range 2 {
				k[i][c] += pht[d] * sInv[d][c]
			}
		}
	}
	return k
}

// josephUpdate returns (I - K H) P (I - K H)^T + K R K^T, the covariance
// update that stays symmetric positive semi-definite under rounding, with
// R diagonal (r holds its diagonal).
func josephUpdate(p mat3, k mat32, h mat23, r [2]float64) mat3 {
	var a mat3 // I - K H
	for i := range 3 {
		for j := range 3 {
			a[i][j] = -(k[i][0]*h[0][j] + k[i][1]*h[1][j])
		}
		a[i][i]++
	}
	var ap mat3 // A P
	for j := range 3 {
		pCol := vec3{p[0][j], p[1][j], p[2][j]}
		for i := range 3 {
			ap[i][j] = dot3(a[i], pCol)
		}
	}
	var out mat3
	for i := range 3 {
		for j := range 3 {
			s := dot3(ap[i], a[j])
			s += k[i][0]*r[0]*k[j][0] + k[i][1]*r[1]*k[j][1]
			out[i][j] = s
		}
	}
	return symmetrize(out)
}

// dot3 returns the dot product of a and b, summed in index order.
func dot3(a, b vec3) float64 {
	var s float64
	for l := range 3 {
		s += a[l] * b[l]
	}
	return s
}

// symmetrize returns (a + a^T) / 2.
func symmetrize(a mat3) mat3 {
	for i := range 3 {
		for j := i + 1; j < 3; j++ {
			m := (a[i][j] + a[j][i]) / 2
			a[i][j], a[j][i] = m, m
		}
	}
	return a
}
