"""Where each part of a protector is in its one float64 array (``Protector._k``).

Everything a protector is lives in one float64 array ``k``, so that a call passes one array
and a number or two: numba checks the type of every argument on every call, and with the
parameters and the state in six arrays, those checks cost more than the arithmetic.

======================  =====================================================
``k[N_CAL]``            K, the number of calibrators
``k[N_RATES]``          R, the number of jump rates
``k[EPS]``              p is clipped to ``[eps, 1 - eps]``
``k[BURN_IN]``          labels before the test martingale restarts
``k[THRESHOLD]``        ln(1 / alpha)
``k[N]``                labels learned
``k[ALARM_AT]``         the label count when the alarm fired, -1 before
``k[PASSIVE]``          the passive weight
``k[LOG_S]``            ln S
``k[HEAD:...]``         c (K), code (K), b (K), ident (K), J (R), then the active
                        weights: one row of K calibrators per jump rate
======================  =====================================================
"""

N_CAL, N_RATES, EPS, BURN_IN, THRESHOLD, N, ALARM_AT, PASSIVE, LOG_S = range(9)
HEAD = 9
