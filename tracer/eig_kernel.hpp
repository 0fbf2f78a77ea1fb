// The reference kernel of the general (non-symmetric) eigenproblem (tracer/eig_kernel.cpp), that the eval rule of
// rules_eig.cpp runs.
#pragma once

#include <vector>

#include "tracer/linalg_kernels.hpp"

namespace tessel::linalg_kernels {

// Eigenvalues w and right eigenvectors (columns of V) of a general square
// matrix a (complex; real inputs come converted), as LAPACK's geev defines
// them: A V = V diag(w); each column of V scaled to unit Euclidean norm with
// its component of largest modulus real and positive (the first such on
// ties). The eigenvalues are in the order the Schur form's diagonal has them
// (not sorted; compare them as sets). V may be null (eigenvalues only);
// otherwise it is resized to n x n. An input with a NaN or infinity gives
// NaN for every output. Throws tessel::ValueError
// (tessel/core/errors.hpp) if the QR iteration does not converge, and
// tessel::ShapeError if a is not square.
void eig_kernel(const Mat<C>& a, std::vector<C>& w, Mat<C>* V);

}  // namespace tessel::linalg_kernels
