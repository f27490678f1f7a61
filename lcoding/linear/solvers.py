"""The LIBLINEAR solvers by ``-s`` number: one explicit table per solver shape.

* ``BINARY_SOLVERS[s](prob: BinaryProblem, params, info) -> SolveResult``: one
  weight vector for +1/-1 targets; multi-class problems run them one-vs-rest.
  ``-s 1, 3`` (and the SGD ``-s 30, 32``) also train locally linear models
  (a :class:`~lcoding.linear.problem.BinaryProblem` with a coding), and ``-s 2``
  too, its products on the coded rows.
* ``METHOD_BINARY_SOLVERS``: the same table as the lcoding methods run it (LL-SVM,
  the linear solve on a kernel map): ``-s 1`` hands over to the primal Newton solver
  when its dual CD stalls (:func:`~lcoding.linear.dual_cd.train_l2loss_svc_dual_switching`);
  the linear method keeps LIBLINEAR's.
* ``MULTICLASS_SOLVERS[s](rows, class_index, nr_class, class_C, params, info, rng)
  -> w (w_size, nr_class)``: one joint problem over the classes.
* ``REGRESSION_SOLVERS_TABLE[s](prob with float targets, params, info) -> SolveResult``.
* ``ONECLASS_SOLVERS[s](rows, params, info, rng) -> (w, rho)``.
"""
from __future__ import annotations

from lcoding.core.options import SolverType
from lcoding.linear.dual_cd import (train_l1loss_svc_dual, train_l2loss_svc_dual,
                                    train_l2loss_svc_dual_switching)
from lcoding.linear.dual_more import (train_l1loss_svr_dual, train_l2loss_svr_dual,
                                      train_mcsvm_cs, train_oneclass_svm)
from lcoding.linear.l1 import solve_l1r_l2_svc, solve_l1r_lr
from lcoding.linear.newton import (train_l2r_l2loss_svc, train_l2r_l2loss_svr, train_l2r_lr,
                                   train_l2r_lr_dual)
from lcoding.linear.sgd import solve_sgd_hinge

BINARY_SOLVERS = {
    int(SolverType.L2R_LR): train_l2r_lr,
    int(SolverType.L2R_L2LOSS_SVC_DUAL): train_l2loss_svc_dual,
    int(SolverType.L2R_L2LOSS_SVC): train_l2r_l2loss_svc,
    int(SolverType.L2R_L1LOSS_SVC_DUAL): train_l1loss_svc_dual,
    int(SolverType.L1R_L2LOSS_SVC): solve_l1r_l2_svc,
    int(SolverType.L1R_LR): solve_l1r_lr,
    int(SolverType.L2R_LR_DUAL): train_l2r_lr_dual,
    int(SolverType.L2R_L1LOSS_SVC_SGD): solve_sgd_hinge,
    int(SolverType.L2R_L1LOSS_SVC_SGD_AVERAGED): solve_sgd_hinge,
}
METHOD_BINARY_SOLVERS = {**BINARY_SOLVERS,
                         int(SolverType.L2R_L2LOSS_SVC_DUAL): train_l2loss_svc_dual_switching}
MULTICLASS_SOLVERS = {int(SolverType.MCSVM_CS): train_mcsvm_cs}
REGRESSION_SOLVERS_TABLE = {
    int(SolverType.L2R_L2LOSS_SVR): train_l2r_l2loss_svr,
    int(SolverType.L2R_L2LOSS_SVR_DUAL): train_l2loss_svr_dual,
    int(SolverType.L2R_L1LOSS_SVR_DUAL): train_l1loss_svr_dual,
}
ONECLASS_SOLVERS = {int(SolverType.ONECLASS_SVM): train_oneclass_svm}
