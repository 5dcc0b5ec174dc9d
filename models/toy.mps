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
    x0 obj 28.567113959936524
    x0 r0 -1.0
    x0 r11 -5.0
    x1 obj 28.54354373389697
    x1 r0 -1.0
    x1 r11 -5.0
    x2 obj 28.519973507857415
    x2 r0 -1.0
    x2 r11 -5.0
    x3 obj 28.49640328181787
    x3 r0 -1.0
    x3 r11 -5.0
    x4 obj 28.472833055778317
    x4 r0 -1.0
    x4 r11 -5.0
    x5 obj 28.449262829738764
    x5 r0 -1.0
    x5 r11 -5.0
    x6 obj 28.425692603699208
    x6 r0 -1.0
    x6 r11 -5.0
    x7 obj 28.402122377659662
    x7 r0 -1.0
    x7 r11 -5.0
    x8 obj 28.378552151620113
    x8 r0 -1.0
    x8 r11 -5.0
    x9 obj 28.354981925580557
    x9 r0 -1.0
    x9 r11 -5.0
    x10 obj 28.331411699541007
    x10 r0 -1.0
    x10 r11 -5.0
    x11 obj 28.307841473501455
    x11 r0 -1.0
    x11 r11 -5.0
    x12 obj 20.2
    x12 r0 -1.0
    x12 r12 -5.0
    x13 obj 20.183333333333337
    x13 r0 -1.0
    x13 r12 -5.0
    x14 obj 20.166666666666664
    x14 r0 -1.0
    x14 r12 -5.0
    x15 obj 20.150000000000002
    x15 r0 -1.0
    x15 r12 -5.0
    x16 obj 20.133333333333333
    x16 r0 -1.0
    x16 r12 -5.0
    x17 obj 20.116666666666667
    x17 r0 -1.0
    x17 r12 -5.0
    x18 obj 20.099999999999998
    x18 r0 -1.0
    x18 r12 -5.0
    x19 obj 20.083333333333332
    x19 r0 -1.0
    x19 r12 -5.0
    x20 obj 20.06666666666667
    x20 r0 -1.0
    x20 r12 -5.0
    x21 obj 20.049999999999997
    x21 r0 -1.0
    x21 r12 -5.0
    x22 obj 20.033333333333335
    x22 r0 -1.0
    x22 r12 -5.0
    x23 obj 20.016666666666666
    x23 r0 -1.0
    x23 r12 -5.0
    x24 obj 35.170242757163415
    x24 r0 -1.0
    x24 r13 -5.0
    x25 obj 35.14122440505355
    x25 r0 -1.0
    x25 r13 -5.0
    x26 obj 35.11220605294368
    x26 r0 -1.0
    x26 r13 -5.0
    x27 obj 35.083187700833804
    x27 r0 -1.0
    x27 r13 -5.0
    x28 obj 35.054169348723924
    x28 r0 -1.0
    x28 r13 -5.0
    x29 obj 35.02515099661406
    x29 r0 -1.0
    x29 r13 -5.0
    x30 obj 34.996132644504186
    x30 r0 -1.0
    x30 r13 -5.0
    x31 obj 34.96711429239432
    x31 r0 -1.0
    x31 r13 -5.0
    x32 obj 34.938095940284455
    x32 r0 -1.0
    x32 r13 -5.0
    x33 obj 34.909077588174576
    x33 r0 -1.0
    x33 r13 -5.0
    x34 obj 34.88005923606471
    x34 r0 -1.0
    x34 r13 -5.0
    x35 obj 34.85104088395483
    x35 r0 -1.0
    x35 r13 -5.0
    x36 obj 40.4
    x36 r0 -1.0
    x36 r14 -5.0
    x37 obj 40.366666666666674
    x37 r0 -1.0
    x37 r14 -5.0
    x38 obj 40.33333333333333
    x38 r0 -1.0
    x38 r14 -5.0
    x39 obj 40.300000000000004
    x39 r0 -1.0
    x39 r14 -5.0
    x40 obj 40.266666666666666
    x40 r0 -1.0
    x40 r14 -5.0
    x41 obj 40.233333333333334
    x41 r0 -1.0
    x41 r14 -5.0
    x42 obj 40.199999999999996
    x42 r0 -1.0
    x42 r14 -5.0
    x43 obj 40.166666666666664
    x43 r0 -1.0
    x43 r14 -5.0
    x44 obj 40.13333333333334
    x44 r0 -1.0
    x44 r14 -5.0
    x45 obj 40.099999999999994
    x45 r0 -1.0
    x45 r14 -5.0
    x46 obj 40.06666666666667
    x46 r0 -1.0
    x46 r14 -5.0
    x47 obj 40.03333333333333
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
    x58 obj 32.32
    x58 r11 1.0
    x59 obj 32.32
    x59 r12 1.0
    x60 obj 32.32
    x60 r13 1.0
    x61 obj 32.32
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
