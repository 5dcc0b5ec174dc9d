NAME toy
OBJSENSE
    MAX
ROWS
 N obj
 E r0
 L r1
 L r2
 L r3
 L r4
 L r5
 L r6
 L r7
 L r8
 L r9
 L r10
 L r11
 L r12
 L r13
 L r14
COLUMNS
    MARKER 'MARKER' 'INTORG'
    x0 obj 3.5708892449920655
    x0 r0 -1.0
    x0 r11 -5.0
    x1 obj 3.5679429667371214
    x1 r0 -1.0
    x1 r11 -5.0
    x2 obj 3.564996688482177
    x2 r0 -1.0
    x2 r11 -5.0
    x3 obj 3.5620504102272337
    x3 r0 -1.0
    x3 r11 -5.0
    x4 obj 3.5591041319722896
    x4 r0 -1.0
    x4 r11 -5.0
    x5 obj 3.5561578537173455
    x5 r0 -1.0
    x5 r11 -5.0
    x6 obj 3.553211575462401
    x6 r0 -1.0
    x6 r11 -5.0
    x7 obj 3.5502652972074578
    x7 r0 -1.0
    x7 r11 -5.0
    x8 obj 3.547319018952514
    x8 r0 -1.0
    x8 r11 -5.0
    x9 obj 3.5443727406975696
    x9 r0 -1.0
    x9 r11 -5.0
    x10 obj 3.541426462442626
    x10 r0 -1.0
    x10 r11 -5.0
    x11 obj 3.538480184187682
    x11 r0 -1.0
    x11 r11 -5.0
    x12 obj 2.525
    x12 r0 -1.0
    x12 r12 -5.0
    x13 obj 2.522916666666667
    x13 r0 -1.0
    x13 r12 -5.0
    x14 obj 2.520833333333333
    x14 r0 -1.0
    x14 r12 -5.0
    x15 obj 2.5187500000000003
    x15 r0 -1.0
    x15 r12 -5.0
    x16 obj 2.5166666666666666
    x16 r0 -1.0
    x16 r12 -5.0
    x17 obj 2.5145833333333334
    x17 r0 -1.0
    x17 r12 -5.0
    x18 obj 2.5124999999999997
    x18 r0 -1.0
    x18 r12 -5.0
    x19 obj 2.5104166666666665
    x19 r0 -1.0
    x19 r12 -5.0
    x20 obj 2.5083333333333337
    x20 r0 -1.0
    x20 r12 -5.0
    x21 obj 2.5062499999999996
    x21 r0 -1.0
    x21 r12 -5.0
    x22 obj 2.504166666666667
    x22 r0 -1.0
    x22 r12 -5.0
    x23 obj 2.502083333333333
    x23 r0 -1.0
    x23 r12 -5.0
    x24 obj 4.396280344645427
    x24 r0 -1.0
    x24 r13 -5.0
    x25 obj 4.392653050631694
    x25 r0 -1.0
    x25 r13 -5.0
    x26 obj 4.38902575661796
    x26 r0 -1.0
    x26 r13 -5.0
    x27 obj 4.3853984626042255
    x27 r0 -1.0
    x27 r13 -5.0
    x28 obj 4.3817711685904905
    x28 r0 -1.0
    x28 r13 -5.0
    x29 obj 4.378143874576757
    x29 r0 -1.0
    x29 r13 -5.0
    x30 obj 4.374516580563023
    x30 r0 -1.0
    x30 r13 -5.0
    x31 obj 4.37088928654929
    x31 r0 -1.0
    x31 r13 -5.0
    x32 obj 4.367261992535557
    x32 r0 -1.0
    x32 r13 -5.0
    x33 obj 4.363634698521822
    x33 r0 -1.0
    x33 r13 -5.0
    x34 obj 4.360007404508089
    x34 r0 -1.0
    x34 r13 -5.0
    x35 obj 4.356380110494354
    x35 r0 -1.0
    x35 r13 -5.0
    x36 obj 5.05
    x36 r0 -1.0
    x36 r14 -5.0
    x37 obj 5.045833333333334
    x37 r0 -1.0
    x37 r14 -5.0
    x38 obj 5.041666666666666
    x38 r0 -1.0
    x38 r14 -5.0
    x39 obj 5.0375000000000005
    x39 r0 -1.0
    x39 r14 -5.0
    x40 obj 5.033333333333333
    x40 r0 -1.0
    x40 r14 -5.0
    x41 obj 5.029166666666667
    x41 r0 -1.0
    x41 r14 -5.0
    x42 obj 5.0249999999999995
    x42 r0 -1.0
    x42 r14 -5.0
    x43 obj 5.020833333333333
    x43 r0 -1.0
    x43 r14 -5.0
    x44 obj 5.0166666666666675
    x44 r0 -1.0
    x44 r14 -5.0
    x45 obj 5.012499999999999
    x45 r0 -1.0
    x45 r14 -5.0
    x46 obj 5.008333333333334
    x46 r0 -1.0
    x46 r14 -5.0
    x47 obj 5.004166666666666
    x47 r0 -1.0
    x47 r14 -5.0
    x48 r0 1.0
    x48 r1 5.0
    x49 r0 1.0
    x49 r2 5.0
    x50 r0 1.0
    x50 r3 5.0
    x51 r0 1.0
    x51 r4 5.0
    x52 r0 1.0
    x52 r5 5.0
    x53 r0 1.0
    x53 r6 5.0
    x54 r0 1.0
    x54 r7 5.0
    x55 r0 1.0
    x55 r8 5.0
    x56 r0 1.0
    x56 r9 5.0
    x57 r0 1.0
    x57 r10 5.0
    x58 obj 4.04
    x58 r11 1.0
    x59 obj 4.04
    x59 r12 1.0
    x60 obj 4.04
    x60 r13 1.0
    x61 obj 4.04
    x61 r14 1.0
    MARKER 'MARKER' 'INTEND'
RHS
    rhs r1 10.0
    rhs r2 10.0
    rhs r3 10.0
    rhs r4 10.0
    rhs r5 10.0
    rhs r6 10.0
    rhs r7 10.0
    rhs r8 10.0
    rhs r9 10.0
    rhs r10 10.0
BOUNDS
 UP bnd x0 1.0
 UP bnd x1 1.0
 UP bnd x2 1.0
 UP bnd x3 1.0
 UP bnd x4 1.0
 UP bnd x5 1.0
 UP bnd x6 1.0
 UP bnd x7 1.0
 UP bnd x8 1.0
 UP bnd x9 1.0
 UP bnd x10 1.0
 UP bnd x11 1.0
 UP bnd x12 1.0
 UP bnd x13 1.0
 UP bnd x14 1.0
 UP bnd x15 1.0
 UP bnd x16 1.0
 UP bnd x17 1.0
 UP bnd x18 1.0
 UP bnd x19 1.0
 UP bnd x20 1.0
 UP bnd x21 1.0
 UP bnd x22 1.0
 UP bnd x23 1.0
 UP bnd x24 1.0
 UP bnd x25 1.0
 UP bnd x26 1.0
 UP bnd x27 1.0
 UP bnd x28 1.0
 UP bnd x29 1.0
 UP bnd x30 1.0
 UP bnd x31 1.0
 UP bnd x32 1.0
 UP bnd x33 1.0
 UP bnd x34 1.0
 UP bnd x35 1.0
 UP bnd x36 1.0
 UP bnd x37 1.0
 UP bnd x38 1.0
 UP bnd x39 1.0
 UP bnd x40 1.0
 UP bnd x41 1.0
 UP bnd x42 1.0
 UP bnd x43 1.0
 UP bnd x44 1.0
 UP bnd x45 1.0
 UP bnd x46 1.0
 UP bnd x47 1.0
 UP bnd x48 2.0
 UP bnd x49 2.0
 UP bnd x50 2.0
 UP bnd x51 2.0
 UP bnd x52 2.0
 UP bnd x53 2.0
 UP bnd x54 2.0
 UP bnd x55 2.0
 UP bnd x56 2.0
 UP bnd x57 2.0
 UP bnd x58 40.0
 UP bnd x59 30.0
 UP bnd x60 20.0
 UP bnd x61 10.0
ENDATA
