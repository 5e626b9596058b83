package slo

import (
	"fmt"
	"math"
)

// EKF constants (spec: process noise 5% of state, measurement noise
// ((0.05/1.96) z)^2, NIS gate 7.378, bounds 0.01x..100x of the initial
// state).
const (
	// processNoiseFraction: Q = diag((0.05 x_i)^2), x the estimate before
	// the step (a random walk of 5% of each parameter per update).
	processNoiseFraction = 0.05
	// measurementNoiseFraction: R = diag(((0.05/1.96) z_k)^2), i.e. the
	// observed mean TTFT and ITL are within 5% of the truth with 95%
	// probability.
	measurementNoiseFraction = 0.05 / 1.96
	// nisThreshold is the chi-square 97.5% quantile for 2 degrees of
	// freedom; an update with NIS >= nisThreshold is rejected as an
	// outlier.
	nisThreshold = 7.378
	// boundLow and boundHigh clamp each parameter to
	// [0.01 x0_i, 100 x0_i] of the initial state x0.
	boundLow  = 0.01
	boundHigh = 100.0
	// initialSpread sets the initial covariance P0 = diag((x0_i)^2): a
	// guess is trusted to its order of magnitude only (one standard
	// deviation = 100% of the guess).
	initialSpread = 1.0
	// jacobianStep is the relative step of the central-difference
	// Jacobian: dh/dx_j ~ (h(x + s e_j) - h(x - s e_j)) / 2s, s = 1e-4 x_j.
	jacobianStep = 1e-4
)

// TunerState is everything a Tuner knows, exported so the service can
// persist it (etcd) and a new leader can resume with RestoreTuner instead
// of starting cold.
type TunerState struct {
	// X is the current estimate [alpha, beta, gamma].
	X Params `json:"x"`
	// P is the estimate's covariance, in the order alpha, beta, gamma.
	P [3][3]float64 `json:"p"`
	// Initial is the first guess x0; the bounds are 0.01 x0 .. 100 x0.
	Initial Params `json:"initial"`
	// Accepted and Rejected count the updates applied and the ones the
	// NIS gate turned away.
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
	// ConsecutiveRejected counts the rejections since the last accepted
	// update. The gate also rejects a genuine large change (new hardware,
	// new engine version) far outside the covariance, and 5% process noise
	// widens it only slowly, so the owner may restart the tuner (from a
	// light-load guess) after a long run of rejections.
	ConsecutiveRejected int `json:"consecutiveRejected"`
}

// Tuner learns one variant's Params online with an extended Kalman filter.
// The state is [alpha, beta, gamma] (a random walk); the observation is
// the mean [TTFT, ITL] a replica reported, predicted by the queueing model
// at the replica's arrival rate, token averages and limits, with a
// central-difference Jacobian. A Tuner is not safe for concurrent use.
type Tuner struct {
	st TunerState
	// model is scratch for the predictions (reset on every call).
	model Model
}

// UpdateResult reports one Update.
type UpdateResult struct {
	// Accepted is false when the NIS gate rejected the observation.
	Accepted bool
	// NIS is the normalised innovation squared y^T S^-1 y.
	NIS float64
	// PredictedTTFTMs and PredictedITLMs are the model's prediction before
	// the update.
	PredictedTTFTMs float64
	PredictedITLMs  float64
	// Params is the estimate after the update.
	Params Params
}

// NewTuner starts a tuner at initial (see InitialParams), with covariance
// diag(x0_i^2). Every initial parameter must be positive: the bounds are
// proportional to it.
func NewTuner(initial Params) (*Tuner, error) {
	if err := validInitial(initial); err != nil {
		return nil, fmt.Errorf("new tuner: %w", err)
	}
	x0 := toVec(initial)
	var p mat3
	for i := range 3 {
		p[i][i] = (initialSpread * x0[i]) * (initialSpread * x0[i])
	}
	return &Tuner{st: TunerState{X: initial, P: p, Initial: initial}}, nil
}

// RestoreTuner resumes a tuner from a persisted state, after checking it.
func RestoreTuner(s TunerState) (*Tuner, error) {
	if err := validInitial(s.Initial); err != nil {
		return nil, fmt.Errorf("restore tuner: %w: initial: %w", ErrInvalidState, err)
	}
	lo, hi := bounds(toVec(s.Initial))
	x := toVec(s.X)
	for i := range 3 {
		if !within(x[i], lo[i]*(1-1e-9), hi[i]*(1+1e-9)) {
			return nil, fmt.Errorf("restore tuner: %w: %s %v outside [%v, %v]", ErrInvalidState, paramNames[i], x[i], lo[i], hi[i])
		}
	}
	for i := range 3 {
		for j := range 3 {
			v := s.P[i][j]
			if !finite(v) || (i == j && v < 0) || math.Abs(v-s.P[j][i]) > 1e-9*(math.Abs(v)+math.Abs(s.P[j][i])) {
				return nil, fmt.Errorf("restore tuner: %w: covariance P[%d][%d] = %v", ErrInvalidState, i, j, v)
			}
		}
	}
	if s.Accepted < 0 || s.Rejected < 0 || s.ConsecutiveRejected < 0 || s.ConsecutiveRejected > s.Rejected {
		return nil, fmt.Errorf("restore tuner: %w: update counts accepted %d, rejected %d, consecutive %d",
			ErrInvalidState, s.Accepted, s.Rejected, s.ConsecutiveRejected)
	}
	return &Tuner{st: s}, nil
}

// State returns a copy of the tuner's state, for persistence.
func (t *Tuner) State() TunerState { return t.st }

// Params returns the current estimate.
func (t *Tuner) Params() Params { return t.st.X }

// Update runs one predict-update step with an observation. A rejected
// observation (NIS >= 7.378) leaves the estimate unchanged but keeps the
// predict step's added process noise, so the filter can re-adapt if the
// "outliers" persist (a real change in the hardware or the engine).
func (t *Tuner) Update(o Observation) (UpdateResult, error) {
	if err := o.validateForTuning(); err != nil {
		return UpdateResult{}, fmt.Errorf("tuner update: %w", err)
	}
	x := toVec(t.st.X)

	// Predict: x stays, P grows by Q = diag((0.05 x_i)^2).
	pPred := t.st.P
	for i := range 3 {
		q := processNoiseFraction * x[i]
		pPred[i][i] += q * q
	}

	// Observe: h(x) and its Jacobian.
	h0, err := t.predict(x, o)
	if err != nil {
		return UpdateResult{}, fmt.Errorf("tuner update: %w", err)
	}
	var jac mat23
	for j := range 3 {
		step := jacobianStep * x[j]
		up, down := x, x
		up[j] += step
		down[j] -= step
		hUp, err := t.predict(up, o)
		if err != nil {
			return UpdateResult{}, fmt.Errorf("tuner update: jacobian: %w", err)
		}
		hDown, err := t.predict(down, o)
		if err != nil {
			return UpdateResult{}, fmt.Errorf("tuner update: jacobian: %w", err)
		}
		for r := range 2 {
			jac[r][j] = (hUp[r] - hDown[r]) / (2 * step)
		}
	}

	z := [2]float64{o.TTFTMs, o.ITLMs}
	y := [2]float64{z[0] - h0[0], z[1] - h0[1]}
	var rDiag [2]float64
	for k := range 2 {
		sd := measurementNoiseFraction * z[k]
		rDiag[k] = sd * sd
	}
	s := covObs(jac, pPred)
	s[0][0] += rDiag[0]
	s[1][1] += rDiag[1]
	sInv, ok := inv2(s)
	if !ok {
		return UpdateResult{}, fmt.Errorf("tuner update: singular innovation covariance %v", s)
	}
	nis := y[0]*(sInv[0][0]*y[0]+sInv[0][1]*y[1]) + y[1]*(sInv[1][0]*y[0]+sInv[1][1]*y[1])
	res := UpdateResult{NIS: nis, PredictedTTFTMs: h0[0], PredictedITLMs: h0[1]}
	if !(nis < nisThreshold) { // also rejects a NaN NIS
		t.st.P = pPred
		t.st.Rejected++
		t.st.ConsecutiveRejected++
		res.Params = t.st.X
		return res, nil
	}

	k := gain(pPred, jac, sInv)
	lo, hi := bounds(toVec(t.st.Initial))
	for i := range 3 {
		x[i] += k[i][0]*y[0] + k[i][1]*y[1]
		x[i] = min(max(x[i], lo[i]), hi[i])
	}
	pNew := josephUpdate(pPred, k, jac, rDiag)
	if !finiteState(x, pNew) {
		return UpdateResult{}, fmt.Errorf("tuner update: non-finite state x=%v P=%v", x, pNew)
	}
	t.st.X, t.st.P = fromVec(x), pNew
	t.st.Accepted++
	t.st.ConsecutiveRejected = 0
	res.Accepted = true
	res.Params = t.st.X
	return res, nil
}

// predict returns the model's [TTFT, ITL] for parameters x under o.
func (t *Tuner) predict(x vec3, o Observation) ([2]float64, error) {
	if err := t.model.reset(fromVec(x), o.Workload, o.Queue); err != nil {
		return [2]float64{}, err
	}
	mt, err := t.model.Solve(o.ArrivalRatePerSecond)
	if err != nil {
		return [2]float64{}, err
	}
	return [2]float64{mt.TTFTMs, mt.ITLMs}, nil
}

// paramNames orders the state vector.
var paramNames = [3]string{"alpha", "beta", "gamma"}

func toVec(p Params) vec3   { return vec3{p.Alpha, p.Beta, p.Gamma} }
func fromVec(x vec3) Params { return Params{Alpha: x[0], Beta: x[1], Gamma: x[2]} }

// bounds returns the clamp interval of each parameter: [0.01 x0, 100 x0],
// the top kept below LimitParamMs by the Jacobian's step so every
// prediction stays in the model's domain.
func bounds(x0 vec3) (lo, hi vec3) {
	for i := range 3 {
		lo[i] = boundLow * x0[i]
		hi[i] = min(boundHigh*x0[i], LimitParamMs/(1+jacobianStep))
	}
	return lo, hi
}

// validInitial checks a first guess: in the model's domain, every
// parameter positive (the bounds are proportional to it) and below the
// largest value the Jacobian can perturb.
func validInitial(p Params) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Beta <= 0 || p.Gamma <= 0 {
		return fmt.Errorf("%w: initial beta %v and gamma %v must be positive", ErrInvalidParams, p.Beta, p.Gamma)
	}
	if top := LimitParamMs / (1 + jacobianStep); max(p.Alpha, p.Beta, p.Gamma) > top {
		return fmt.Errorf("%w: initial parameters %+v must not exceed %v ms", ErrInvalidParams, p, top)
	}
	return nil
}

// finiteState reports whether x and P are finite.
func finiteState(x vec3, p mat3) bool {
	for i := range 3 {
		if !finite(x[i]) {
			return false
		}
		for j := range 3 {
			if !finite(p[i][j]) {
				return false
			}
		}
	}
	return true
}
